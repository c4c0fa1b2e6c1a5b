// A real two-node run on one machine: two network namespaces joined by a veth pair act as the
// two nodes of a cluster, each running the start-up script Terraform would render for it (the
// install steps are cloud-init's and are skipped: this checkout is already built). The job
// rendezvouses across the two addresses, trains with DDP on Gloo, and every rank must end with
// the same weights as the snapshot node 0 writes. Needs root; skipped where namespaces cannot
// be made.
import assert from "node:assert/strict";
import { flagMap, launchArguments } from "./shell.ts";
import { assertSameWeights, weights } from "./weights.ts";
import { build, REPO } from "./repo.ts";
import { renderStartTraining } from "./start_training.ts";
import { NETNS_SKIP, NodeNetwork, type NodeRun, tail } from "./netns_cluster.ts";

/** For both nodes together, from spawning the scripts to both exiting. */
const RUN_TIMEOUT_MS = 45_000;
/** Ranks per node: two, so that the job has pairs both within a node and across the two. */
const NPROC_PER_NODE = 2;

if (NETNS_SKIP !== null) {
  console.warn(`tests/infrastructure/netns_test.ts: skipping the two-node run: ${NETNS_SKIP}`);
}

function assertExited(run: NodeRun): void {
  assert.equal(
    run.code,
    0,
    `node ${run.node} exited with ${run.code}; last lines:\n${tail(run.stdout + run.stderr)}`,
  );
}

Deno.test({
  name:
    "two nodes in their own network namespaces run their rendered start-up scripts, rendezvous across a veth pair, train with DDP on Gloo and end with identical weights",
  ignore: NETNS_SKIP !== null,
  async fn() {
    await build();
    const dir = await Deno.makeTempDir({ prefix: "dtrain-netns-" });
    try {
      await using network = await NodeNetwork.create();
      const master = network.nodes[0].address;
      const token = crypto.randomUUID();
      const commands = [];
      for (const rank of network.nodes.keys()) {
        const nodeDir = `${dir}/node-${rank}`;
        // Only what differs on this machine: the checkout, per-node folders (there is no
        // shared filesystem here), the CPU, a short run.
        const script = await renderStartTraining({
          install_dir: REPO,
          nnodes: 2,
          node_rank: rank,
          nproc_per_node: NPROC_PER_NODE,
          master_addr: master,
          master_port: 29500,
          connect_attempts: 30,
          connect_interval_s: 1,
          max_restarts: 0,
          log_dir: `${nodeDir}/logs`,
          device: "cpu",
          train_args: ["--epochs", "1", "--save-every", "1", "--batch-size", "256"],
          snapshot_path: `${nodeDir}/snapshot.safetensors`,
        });
        const flags = flagMap(launchArguments(script));
        assert.equal(flags.get("master-addr"), master);
        assert.equal(flags.get("node-rank"), String(rank));
        await Deno.mkdir(`${nodeDir}/weights`, { recursive: true });
        await Deno.writeTextFile(`${nodeDir}/start-training.sh`, script);
        commands.push({
          args: ["bash", `${nodeDir}/start-training.sh`],
          env: {
            PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
            HOME: Deno.env.get("HOME") ?? "/root",
            ...(Deno.env.has("DENO_DIR") ? { DENO_DIR: Deno.env.get("DENO_DIR")! } : {}),
            NO_COLOR: "1",
            DENO_NO_UPDATE_CHECK: "1",
            DTRAIN_TOKEN: token,
            // No DTRAIN_GLOO_HOST: each rank must advertise the address it reaches the store
            // from (its own namespace's), as on a real cluster.
            DTRAIN_WEIGHTS_DUMP: `${nodeDir}/weights`,
          },
        });
      }

      const runs = await network.run(commands, RUN_TIMEOUT_MS);
      runs.forEach(assertExited);
      assert.match(
        runs[1].stderr,
        new RegExp(`master ${master.replaceAll(".", "\\.")}:29500 is up`),
      );
      assert.match(runs[0].stdout, /\[rank 0\] done: 1 epochs/);
      for (const i of [0, 1]) {
        assert.deepEqual(await network.pids(i), [], `processes left in node ${i}'s namespace`);
      }

      const snapshot = weights(`${dir}/node-0/snapshot.safetensors`, "model.");
      assert.ok(snapshot.size > 0, "node 0's snapshot holds no model weights");
      for (let rank = 0; rank < 2 * NPROC_PER_NODE; rank++) {
        const node = Math.floor(rank / NPROC_PER_NODE);
        const dump = weights(`${dir}/node-${node}/weights/rank${rank}.safetensors`);
        assertSameWeights(snapshot, dump, `rank ${rank} on node ${node} against node 0's snapshot`);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
