// Two network-namespace "hosts" with 2 ranks each run the collectives hierarchically (shared
// memory within each host, Gloo between the hosts' leaders) and get what 4 ranks on one host
// get over shared memory alone. Needs root; skipped where namespaces cannot be made.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { freePort } from "../_harness/ranks.ts";
import { NETNS_SKIP, NodeNetwork, tail } from "../infrastructure/netns_cluster.ts";

const REPO = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "");
const WORKER = `${REPO}/tests/distributed/workers/shm.ts`;
const RUN_TIMEOUT_MS = 90_000;

if (NETNS_SKIP !== null) console.warn(`shm_netns_test.ts: skipping: ${NETNS_SKIP}`);

function launchArgs(nnodes: number, nodeRank: number, nproc: number, addr: string, port: number) {
  return [
    Deno.execPath(),
    "run",
    "-A",
    `${REPO}/src/launch/main.ts`,
    ...["--nnodes", String(nnodes), "--node-rank", String(nodeRank)],
    ...["--nproc-per-node", String(nproc), "--master-addr", addr, "--master-port", String(port)],
    WORKER,
  ];
}

function env(outDir: string, token: string): Record<string, string> {
  return {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    ...(Deno.env.has("DENO_DIR") ? { DENO_DIR: Deno.env.get("DENO_DIR")! } : {}),
    NO_COLOR: "1",
    DENO_NO_UPDATE_CHECK: "1",
    DTRAIN_TOKEN: token,
    DTRAIN_SHM: "1",
    MODE: "dump",
    OUT_DIR: outDir,
    BIG: "300007",
  };
}

interface Dump {
  backend: string;
  size: number;
  rows: Record<string, number[]>;
}

async function dumps(dir: string): Promise<Dump[]> {
  return await Promise.all(
    [0, 1, 2, 3].map(async (r) => JSON.parse(await Deno.readTextFile(`${dir}/rank${r}.json`))),
  );
}

Deno.test({
  name:
    "two network-namespace hosts with 2 ranks each reduce hierarchically and match 4 ranks on one host",
  ignore: NETNS_SKIP !== null,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "dtrain-shm-netns-" });
    try {
      const token = crypto.randomUUID();
      await Deno.mkdir(`${dir}/hier`);
      await Deno.mkdir(`${dir}/flat`);
      {
        await using network = await NodeNetwork.create();
        const master = network.nodes[0].address;
        const runs = await network.run(
          [0, 1].map((i) => ({
            args: launchArgs(2, i, 2, master, 29500),
            env: env(`${dir}/hier`, token),
          })),
          RUN_TIMEOUT_MS,
        );
        for (const run of runs) {
          assert.equal(run.code, 0, `node ${run.node}:\n${tail(run.stdout + run.stderr, 40)}`);
        }
      }
      const flat = await new Deno.Command(Deno.execPath(), {
        args: launchArgs(1, 0, 4, "127.0.0.1", freePort()).slice(1),
        env: env(`${dir}/flat`, token),
        clearEnv: true,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
      }).output();
      const text = new TextDecoder().decode(flat.stderr);
      assert.equal(flat.code, 0, tail(text, 40));

      const [hier, one] = [await dumps(`${dir}/hier`), await dumps(`${dir}/flat`)];
      assert.deepEqual(hier.map((d) => d.backend), Array(4).fill("shm+gloo"));
      assert.deepEqual(one.map((d) => d.backend), Array(4).fill("shm"));
      for (let rank = 0; rank < 4; rank++) {
        const names = Object.keys(one[rank].rows);
        assert.deepEqual(Object.keys(hier[rank].rows), names);
        assert.ok(names.length >= 25, `only ${names.length} collectives compared`);
        for (const name of names) {
          const [a, b] = [hier[rank].rows[name], one[rank].rows[name]];
          assert.equal(a.length, b.length, `${name} on rank ${rank}`);
          const exact = name.includes("i32") || name.includes("broadcast") ||
            name.includes("allGather") || / (max|min) /.test(name);
          for (let i = 0; i < a.length; i++) {
            const d = Math.abs(a[i] - b[i]);
            if (exact ? d !== 0 : d > 1e-6 * (1 + Math.abs(b[i]))) {
              assert.fail(`${name} on rank ${rank}, element ${i}: ${a[i]} vs ${b[i]} on one host`);
            }
          }
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
