// infrastructure/slurm/dtrain.sbatch, offline against a stand-in srun: one launcher per node, SLURM's
// node id as its rank and the first host as master. Then on a real SLURM cluster: slurmctld on the
// host, one slurmd per node in its own network and UTS namespace, three nodes joined through a
// bridge. A two-node job
// trains with DDP on Gloo and both nodes end with the same weights; then a job one of whose nodes
// dies mid-run (its slurmd and job step killed) is requeued by SLURM onto the two nodes left,
// resumes from the shared snapshot and ends bit-identical to the uninterrupted job. Needs root;
// skipped where network namespaces cannot be made.
import assert from "node:assert/strict";
import { NETNS_SKIP, NodeNetwork } from "./netns_cluster.ts";
import { build, REPO } from "./repo.ts";
import {
  type JobInfo,
  missingSlurmPrograms,
  SlurmCluster,
  SLURMD_TIMEOUT_S,
} from "./slurm_cluster.ts";
import { assertSameWeights, weights } from "./weights.ts";
import { flagMap, runSbatch } from "./shell.ts";
import { trainConfig } from "./clusters.ts";

/** Epochs of each job: long enough (about 100 ms each) that a node can die mid-run. */
const EPOCHS = 60;
/** From submitting a job to its end, when nothing goes wrong. */
const JOB_TIMEOUT_MS = 60_000;
/** From a node's death to the controller requeueing its job (it marks the node down first). */
const REQUEUE_TIMEOUT_MS = (4 * SLURMD_TIMEOUT_S + 10) * 1000;

if (NETNS_SKIP !== null) {
  console.warn(`tests/infrastructure/slurm_test.ts: skipping the SLURM cluster: ${NETNS_SKIP}`);
}

/** Where a job keeps its snapshot, logs, SLURM output and every rank's final weights. */
function jobDirs(root: string, name: string) {
  const shared = `${root}/${name}`;
  return {
    shared,
    output: `${shared}/slurm.out`,
    snapshot: `${shared}/snapshot.safetensors`,
    dumps: `${shared}/weights`,
  };
}

/** Submits the batch script for 2 nodes, one CPU process each, on a short synthetic run. */
async function submit(cluster: SlurmCluster, dirs: ReturnType<typeof jobDirs>): Promise<number> {
  await Deno.mkdir(dirs.dumps, { recursive: true });
  const env: Record<string, string> = {
    HOME: Deno.env.get("HOME") ?? "/root",
    ...(Deno.env.has("DENO_DIR") ? { DENO_DIR: Deno.env.get("DENO_DIR")! } : {}),
    NO_COLOR: "1",
    DENO_NO_UPDATE_CHECK: "1",
    DTRAIN_DIR: REPO,
    SHARED_DIR: dirs.shared,
    DEVICE: "cpu",
    NPROC_PER_NODE: "1",
    MAX_RESTARTS: "0",
    DTRAIN_WEIGHTS_DUMP: dirs.dumps,
  };
  return await cluster.sbatch([
    "--nodes=2",
    "--gpus-per-node=0",
    `--output=${dirs.output}`,
    `${REPO}/infrastructure/slurm/dtrain.sbatch`,
    "--dataset",
    "synthetic",
    "--model",
    "linear",
    "--epochs",
    String(EPOCHS),
    "--save-every",
    "1",
    "--batch-size",
    "4",
  ], env);
}

function assertCompleted(info: JobInfo, output: string): void {
  assert.equal(
    `${info.JobState} ${info.ExitCode}`,
    "COMPLETED 0:0",
    `job ${info.JobId}:\n${Deno.readTextFileSync(output)}`,
  );
}

/** Both nodes' final weights: byte-identical files, bit-identical to the snapshot's model. */
function assertNodesAgree(dirs: ReturnType<typeof jobDirs>): Uint8Array {
  const dump = (rank: number) => {
    try {
      return Deno.readFileSync(`${dirs.dumps}/rank${rank}.safetensors`);
    } catch (error) {
      throw new Error(
        `rank ${rank} wrote no final weights (${error}); the job's output:\n` +
          Deno.readTextFileSync(dirs.output),
      );
    }
  };
  const [rank0, rank1] = [dump(0), dump(1)];
  assert.deepEqual(rank1, rank0, "node 1's final weights differ from node 0's (byte for byte)");
  const snapshot = weights(dirs.snapshot, "model.");
  assert.ok(snapshot.size > 0, "the snapshot holds no model weights");
  assertSameWeights(snapshot, weights(`${dirs.dumps}/rank1.safetensors`), "node 1 vs snapshot");
  return rank0;
}

Deno.test({
  name:
    "SLURM: a two-node sbatch job trains to identical weights on both nodes, and a job whose node dies mid-run is requeued and resumes to the same weights",
  ignore: NETNS_SKIP !== null,
  async fn(t) {
    const missing = missingSlurmPrograms();
    assert.deepEqual(
      missing,
      [],
      `not installed: ${missing.join(", ")} (scripts/bootstrap.sh installs slurm-wlm and munge)`,
    );
    await build();
    const root = await Deno.makeTempDir({ prefix: "dtrain-slurm-jobs-" });
    try {
      // Three nodes: a two-node job, and a spare for when one of its nodes dies.
      await using network = await NodeNetwork.create({
        nodes: 3,
        subnet: 1,
        hostBridge: true,
        hostNamePrefix: "dtrain-node",
      });
      await using cluster = await SlurmCluster.create(network, 2);
      const whole = jobDirs(root, "uninterrupted");
      let expected: Uint8Array = new Uint8Array();

      await t.step("a two-node job ends with the same weights on both nodes", async () => {
        const id = await submit(cluster, whole);
        const info = await cluster.waitForJobEnd(id, JOB_TIMEOUT_MS, whole.output);
        assertCompleted(info, whole.output);
        assert.equal(info.NodeList, "dtrain-node[0-1]");
        const output = Deno.readTextFileSync(whole.output);
        assert.match(output, /master dtrain-node0:29500/);
        assert.match(output, new RegExp(`done: ${EPOCHS} epochs`));
        expected = assertNodesAgree(whole);
      });

      await t.step(
        "a job whose node dies is requeued and resumes to the same weights",
        async () => {
          const requeued = jobDirs(root, "requeued");
          const id = await submit(cluster, requeued);
          // A node of the job other than the batch host dies once the first snapshot is on
          // the shared disk, long before the end.
          await cluster.waitFor("the first snapshot", JOB_TIMEOUT_MS, async () => {
            const info = await cluster.job(id);
            assert.equal(info.JobState === "COMPLETED", false, "the job ended before the kill");
            return await Deno.stat(requeued.snapshot).then(() => true, () => false);
          });
          const first = await cluster.job(id);
          const names = network.nodes.map((node) => node.hostName!);
          const victim = (await cluster.hostnames(first.NodeList))
            .find((name) => name !== first.BatchHost)!;
          await cluster.killNode(names.indexOf(victim));
          await cluster.waitFor("the job to be requeued", REQUEUE_TIMEOUT_MS, async () => {
            const info = await cluster.job(id);
            return info.JobState === "PENDING" && info.Restarts === "1";
          });
          // SLURM holds a requeued job back for two minutes; the test skips that as an
          // administrator would, once the nodes left have finished the first run.
          await cluster.waitForNodes("idle", 30_000, names.filter((name) => name !== victim));
          await cluster.command(["scontrol", "update", `JobId=${id}`, "StartTime=now"]);
          const info = await cluster.waitForJobEnd(id, JOB_TIMEOUT_MS, requeued.output);
          assertCompleted(info, requeued.output);
          assert.equal(info.Restarts, "1");
          const second = await cluster.hostnames(info.NodeList);
          assert.equal(second.length, 2, `the second run's nodes: ${info.NodeList}`);
          assert.ok(!second.includes(victim), `the second run used the dead ${victim}`);

          const output = Deno.readTextFileSync(requeued.output);
          assert.match(
            output,
            /run 1\n[\s\S]*dtrain: 2 nodes x 1 processes, .* run 2\n/,
            "the batch script ran twice, the second time on 2 nodes again",
          );
          const resumed = /resuming from \S+ at epoch (\d+)/.exec(output);
          assert.ok(resumed, `the second run did not resume:\n${output}`);
          const epoch = Number(resumed[1]);
          assert.ok(epoch >= 1 && epoch < EPOCHS, `resumed at epoch ${epoch} of ${EPOCHS}`);
          assert.deepEqual(assertNodesAgree(requeued), expected, "requeued vs uninterrupted run");
          assertSameWeights(
            weights(whole.snapshot, "model."),
            weights(requeued.snapshot, "model."),
            "requeued snapshot vs uninterrupted snapshot",
          );
        },
      );
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
});

Deno.test("SLURM batch script starts one launcher per node with SLURM's node id as rank and first host as master", async () => {
  const { dir, ...run } = await runSbatch(`${REPO}/infrastructure/slurm/dtrain.sbatch`, []);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.denoCalls.length, 2);
  const launches = run.denoCalls.map((call) => ({ ...call, flags: flagMap(call.args.slice(2)) }))
    .sort((a, b) => Number(a.flags.get("node-rank")) - Number(b.flags.get("node-rank")));
  for (const [rank, { args, flags, cwd, tokenSet }] of launches.entries()) {
    assert.equal(tokenSet, true);
    assert.equal(cwd, `${dir}/checkout`);
    assert.equal(flags.get("node-rank"), String(rank));
    assert.equal(flags.get("nnodes"), "2");
    assert.equal(flags.get("master-addr"), "gpu-node-01");
    assert.equal(flags.get("master-port"), "29500");
    assert.equal(flags.get("snapshot"), `${dir}/shared/snapshot.safetensors`);
    assert.equal(flags.get("log-dir"), `${dir}/shared/logs/node-${rank}`);
    assert.equal(trainConfig(args.slice(2)).nodeRank, rank);
  }
  assert.doesNotMatch(run.stdout + run.stderr, /DTRAIN_TOKEN=/);
});
