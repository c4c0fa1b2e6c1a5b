// What a cluster trains is the user's (issue 23): a Terraform root's train_args, the SLURM
// script's arguments and the Kubernetes Job's container args reach `deno task train` on every
// node word for word, after the recipe's own per-node flags, which they may not repeat (refused,
// naming the flag); without them every recipe still trains the MLP job it always did.
import assert from "node:assert/strict";
import type { Value } from "./expression.ts";
import { loadConfig } from "./terraform.ts";
import { validationFailures } from "./terraform_plan.ts";
import { fakeCheckout, flagMap, launchArguments, runSbatch, runScript } from "./shell.ts";
import {
  cloud,
  type CloudRoot,
  CLOUDS,
  exampleValues,
  fileOf,
  INFRA_DIR,
  MASTER_ADDR,
  renderCluster,
  START_SCRIPT,
  TOKEN,
} from "./clusters.ts";
import { loadManifests, type Manifest, renderIndexedPod, runPod } from "./kubernetes.ts";

/**
 * A GPT on token files with FSDP, in flags the train job is about to gain (the recipes pass train
 * flags on, they never check them), and words a shell would split, expand or glob.
 */
const GPT_ARGS = [
  "--model",
  "gpt",
  "--dataset",
  "tokens",
  "--data-dir",
  "/shared/data/shakespeare_char",
  "--strategy",
  "fsdp",
  "--max-iters",
  "2000",
  "--eval-interval",
  "250",
  "--run-name",
  "shakespeare char $HOME 'v2'",
  '--note=it\'s "quoted" `x` \\ * ~ ${x}',
  "",
];
/** The job every recipe ran before it took a train command line, and still runs by default. */
const MLP_ARGS = ["--epochs", "10", "--save-every", "1", "--batch-size", "64"];
/** The per-node launcher flags the issue names; every recipe sets these and more. */
const LAUNCHER_FLAGS = ["nnodes", "node-rank", "nproc-per-node", "master-addr", "master-port"];

const SLURM_SCRIPT = `${INFRA_DIR}/slurm/dtrain.sbatch`;
const MANIFEST = `${INFRA_DIR}/kubernetes/dtrain-job.yaml`;

/** The recipe's own flags in a launch: what precedes the train args, which must end it intact. */
function recipeFlags(args: string[], trainArgs: string[]): Map<string, string> {
  const own = args.slice(0, args.length - trainArgs.length);
  assert.deepEqual(args.slice(own.length), trainArgs, "the train args, word for word, last");
  return flagMap(own);
}

/** Train args that set one of the recipe's flags, both ways the train parser reads a flag. */
function collisions(flags: Iterable<string>): { flag: string; args: string[] }[] {
  return [...flags].flatMap((flag) => [
    { flag: `--${flag}`, args: [`--${flag}`, "7"] },
    { flag: `--${flag}`, args: ["--seed", "1", `--${flag}=7`] },
  ]);
}

// ---- Terraform ----

/** A root's nodes for the example values, with train_args as given (or its default if null). */
async function renderWith(root: CloudRoot, trainArgs: string[] | null) {
  const values: Record<string, Value> = await exampleValues(root.dir);
  if (trainArgs === null) delete values.train_args;
  else values.train_args = trainArgs;
  return await renderCluster(values, root);
}

for (const root of CLOUDS) {
  Deno.test(`${root.name}: train_args reach every node's launch intact, after the same per-node flags; the default is the MLP job`, async () => {
    const defaults = await renderWith(root, null);
    const gpt = await renderWith(root, GPT_ARGS);
    assert.equal(gpt.length, defaults.length);
    for (const [rank, node] of gpt.entries()) {
      const mlpFlags = recipeFlags(launchArguments(fileOf(defaults[rank], START_SCRIPT)), MLP_ARGS);
      const gptFlags = recipeFlags(launchArguments(fileOf(node, START_SCRIPT)), GPT_ARGS);
      assert.deepEqual(gptFlags, mlpFlags, `node ${rank}: the recipe's flags changed`);
      assert.equal(gptFlags.get("node-rank"), String(rank));
      for (const flag of LAUNCHER_FLAGS) assert.ok(gptFlags.has(flag), `node ${rank}: --${flag}`);
    }
  });
}

Deno.test("every node's rendered start-up script hands bash's deno exactly train_args, on each cloud", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepting = (async () => {
    for await (const connection of listener) connection.close();
  })();
  try {
    const port = (listener.addr as Deno.NetAddr).port;
    for (const root of CLOUDS) {
      for (const [rank, node] of (await renderWith(root, GPT_ARGS)).entries()) {
        // The node's own script, moved to this machine: its checkout and shared folder into a
        // temporary one, its master onto a loopback port that accepts.
        const dir = Deno.makeTempDirSync({ prefix: "dtrain-train-args-" });
        fakeCheckout(`${dir}/checkout`);
        const script = fileOf(node, START_SCRIPT).replaceAll("/opt/dtrain", `${dir}/checkout`)
          .replaceAll("/mnt/shared", `${dir}/shared`).replaceAll(MASTER_ADDR, "127.0.0.1")
          .replaceAll("29500", String(port));
        Deno.writeTextFileSync(`${dir}/start.sh`, script);
        const run = await runScript(`${dir}/start.sh`, [], { DTRAIN_TOKEN: TOKEN }, `${dir}/calls`);
        const where = `${root.name} node ${rank}`;
        assert.equal(run.code, 0, `${where}: ${run.stderr}`);
        assert.equal(run.denoCalls.length, 1, where);
        const { args } = run.denoCalls[0];
        assert.deepEqual(args, ["task", "train", ...launchArguments(script)], where);
        assert.equal(recipeFlags(args.slice(2), GPT_ARGS).get("node-rank"), String(rank), where);
        Deno.removeSync(dir, { recursive: true });
      }
    }
  } finally {
    listener.close();
    await accepting.catch(() => {});
  }
});

Deno.test("train_args may not repeat a flag the recipe sets on every node, in either spelling", async () => {
  const nebius = cloud("Nebius");
  const config = await loadConfig(nebius.dir); // job.tf, and so the check, is every root's
  const good = await exampleValues(nebius.dir);
  const [node] = await renderWith(nebius, null);
  const own = recipeFlags(launchArguments(fileOf(node, START_SCRIPT)), MLP_ARGS).keys();
  for (const { args: train_args } of collisions(own)) {
    const failures = await validationFailures(config, { ...good, train_args });
    const context = `${JSON.stringify(train_args)}: ${failures.join("; ")}`;
    assert.equal(failures.length, 1, context);
    assert.match(failures[0], /^train_args: .*the recipe sets them on every node/, context);
  }
  for (const train_args of [GPT_ARGS, [], ["--nnodes-extra", "1", "--devices", "--snapshots=x"]]) {
    assert.deepEqual(await validationFailures(config, { ...good, train_args }), []);
  }
});

// ---- SLURM ----

Deno.test("SLURM: the script's arguments reach every node's launch intact, after its per-node flags; none gives the MLP job", async () => {
  const gpt = await runSbatch(SLURM_SCRIPT, GPT_ARGS);
  const mlp = await runSbatch(SLURM_SCRIPT, []);
  for (const run of [gpt, mlp]) assert.equal(run.code, 0, run.stderr);
  assert.equal(gpt.denoCalls.length, 2);
  const byRank = (run: typeof gpt, trainArgs: string[]) =>
    run.denoCalls.map((call) => {
      assert.deepEqual(call.args.slice(0, 2), ["task", "train"]);
      return recipeFlags(call.args.slice(2), trainArgs);
    }).sort((a, b) => Number(a.get("node-rank")) - Number(b.get("node-rank")));
  const relative = (flags: Map<string, string>, dir: string) =>
    [...flags].map(([flag, value]) => [flag, value.replace(dir, "DIR")]);
  const [gptFlags, mlpFlags] = [byRank(gpt, GPT_ARGS), byRank(mlp, MLP_ARGS)];
  for (const [rank, flags] of gptFlags.entries()) {
    assert.equal(flags.get("node-rank"), String(rank));
    assert.deepEqual(relative(flags, gpt.dir), relative(mlpFlags[rank], mlp.dir));
    for (const flag of LAUNCHER_FLAGS) assert.ok(flags.has(flag), `node ${rank}: --${flag}`);
  }
  for (const run of [gpt, mlp]) Deno.removeSync(run.dir, { recursive: true });
});

Deno.test("SLURM: an argument repeating the script's per-node flags, or a train setting it no longer reads, stops the job before srun", async () => {
  const mlp = await runSbatch(SLURM_SCRIPT, []);
  const own = [...recipeFlags(mlp.denoCalls[0].args.slice(2), MLP_ARGS).keys()];
  for (const { flag, args } of collisions(own)) {
    const run = await runSbatch(SLURM_SCRIPT, args);
    assert.equal(run.code, 2, `${args}: ${run.stderr}`);
    assert.ok(run.stderr.includes(`set ${flag}, which this script sets on every node`), run.stderr);
    assert.equal(run.denoCalls.length, 0);
    Deno.removeSync(run.dir, { recursive: true });
  }
  const old = await runSbatch(SLURM_SCRIPT, [], { EPOCHS: "20" });
  assert.equal(old.code, 2);
  assert.match(old.stderr, /EPOCHS is no longer read; pass --epochs 20 after the script/);
  assert.equal(old.denoCalls.length, 0);
  for (const run of [mlp, old]) Deno.removeSync(run.dir, { recursive: true });
});

// ---- Kubernetes ----

/** Runs every pod of the Job, with its container's args replaced when `args` is given. */
async function runPods(args?: string[]) {
  const job: Manifest = structuredClone(loadManifests(MANIFEST).find((d) => d.kind === "Job")!);
  if (args !== undefined) job.spec.template.spec.containers[0].args = args;
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-k8s-args-" });
  fakeCheckout(`${dir}/checkout`);
  const runs = [];
  for (let index = 0; index < job.spec.completions; index++) {
    const pod = renderIndexedPod(job, index, { "dtrain-token": { DTRAIN_TOKEN: TOKEN } });
    runs.push(await runPod(pod, `${dir}/checkout`, `${dir}/calls-${index}`));
  }
  Deno.removeSync(dir, { recursive: true });
  return runs;
}

Deno.test("Kubernetes: the container's args reach every pod's launch intact, after the Job's per-pod flags; the manifest's are the MLP job", async () => {
  const mlp = await runPods();
  const gpt = await runPods(GPT_ARGS);
  for (const [index, run] of gpt.entries()) {
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.denoCalls.length, 1);
    const [call] = run.denoCalls;
    assert.deepEqual(call.args.slice(0, 2), ["task", "train"]);
    const flags = recipeFlags(call.args.slice(2), GPT_ARGS);
    assert.deepEqual(flags, recipeFlags(mlp[index].denoCalls[0].args.slice(2), MLP_ARGS));
    assert.equal(flags.get("node-rank"), String(index));
    for (const flag of LAUNCHER_FLAGS) assert.ok(flags.has(flag), `pod ${index}: --${flag}`);
  }
});

Deno.test("Kubernetes: container args that repeat one of the Job's per-pod flags stop the pod, naming it", async () => {
  const [mlp] = await runPods();
  const own = [...recipeFlags(mlp.denoCalls[0].args.slice(2), MLP_ARGS).keys()];
  for (const { flag, args } of collisions(own)) {
    for (const run of await runPods(args)) {
      assert.equal(run.code, 2, `${args}: ${run.stderr}`);
      assert.ok(run.stderr.includes(`set ${flag}, which the Job's command sets`), run.stderr);
      assert.equal(run.denoCalls.length, 0);
    }
  }
});
