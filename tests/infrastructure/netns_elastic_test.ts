// An elastic job across two network namespaces (two nodes joined by a veth pair, each with its
// own address): `--nnodes 1:2`, node 1 is lost mid-epoch (every process in its namespace
// SIGKILLed after the snapshot at sample 1024 of the second epoch), and node 0 finishes alone at
// world size 2 from that snapshot. Needs root; skipped where namespaces cannot be made.
import assert from "node:assert/strict";
import { collectLines } from "../_harness/lines.ts";
import { NETNS_SKIP, NodeNetwork, tail } from "./netns_cluster.ts";
import { HOOKED_MAIN, SMALL_JOB } from "../train/_train.ts";
import { REPO } from "./repo.ts";

const RUN_TIMEOUT_MS = 60_000;

if (NETNS_SKIP !== null) {
  console.warn(`tests/infrastructure/netns_elastic_test.ts: skipping: ${NETNS_SKIP}`);
}

Deno.test({
  name:
    "an elastic job across two network namespaces loses node 1 mid-epoch and finishes on node 0 from the last snapshot",
  ignore: NETNS_SKIP !== null,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "dtrain-netns-elastic-" });
    try {
      await using network = await NodeNetwork.create();
      const master = network.nodes[0].address;
      const token = crypto.randomUUID();
      const snapshot = `${dir}/snapshot.safetensors`; // one filesystem: both "nodes" share it
      let lostAt = 0;
      const nodes = [0, 1].map((i) => {
        const child = new Deno.Command("ip", {
          args: [
            "netns",
            "exec",
            network.nodes[i].name,
            Deno.execPath(),
            "run",
            "-A",
            "--v8-flags=--expose-gc",
            `${REPO}/src/launch/main.ts`,
            "--nnodes",
            "1:2",
            "--node-rank",
            String(i),
            "--nproc-per-node",
            "2",
            "--master-addr",
            master,
            "--master-port",
            "29500",
            "--max-restarts",
            "1",
            HOOKED_MAIN,
            ...SMALL_JOB,
            "--epochs",
            "3",
            "--save-every-steps",
            "2",
            "--snapshot",
            snapshot,
          ],
          env: {
            PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
            HOME: Deno.env.get("HOME") ?? "/root",
            ...(Deno.env.has("DENO_DIR") ? { DENO_DIR: Deno.env.get("DENO_DIR")! } : {}),
            NO_COLOR: "1",
            DENO_NO_UPDATE_CHECK: "1",
            DTRAIN_TOKEN: token,
            ...(i === 1 ? { DTRAIN_TEST_STALL_AT: "1:1024" } : {}),
          },
          clearEnv: true,
          stdin: "null",
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        const stdout = collectLines(child.stdout, async (line) => {
          if (i !== 1 || lostAt !== 0 || !/\] stalled at /.test(line)) return;
          lostAt = performance.now();
          for (const pid of await network.pids(1)) {
            try {
              Deno.kill(pid, "SIGKILL");
            } catch {
              // exited meanwhile
            }
          }
        });
        const stderr = collectLines(child.stderr, () => {});
        return { child, stdout, stderr };
      });
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(async () => {
          await network.killAll();
          reject(new Error(`still running after ${RUN_TIMEOUT_MS} ms (every process killed)`));
        }, RUN_TIMEOUT_MS);
      });
      let status0: Deno.CommandStatus;
      try {
        status0 = await Promise.race([nodes[0].child.status, timeout]);
        await Promise.race([nodes[1].child.status, timeout]);
      } finally {
        clearTimeout(timer);
        await network.killAll();
      }
      const [out0, err0] = [await nodes[0].stdout, await nodes[0].stderr];
      assert.ok(lostAt > 0, `node 1 never stalled:\n${tail(await nodes[1].stderr)}`);
      assert.equal(status0.code, 0, `node 0:\n${tail(out0 + err0, 40)}`);
      assert.match(err0, /launch: round 1: node 0 of 1 \(world size 2\)/);
      assert.match(out0, /resuming from .* at epoch 1, sample 1024 \(world size 2\)/);
      assert.match(out0, /\[rank 0\] done: 3 epochs/);
      for (const i of [0, 1]) {
        assert.deepEqual(await network.pids(i), [], `processes left in node ${i}'s namespace`);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
