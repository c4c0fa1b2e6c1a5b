// The train job's --pp flags as real processes under the launcher, each against one process on
// the same global batches of 16 (losses, gradient norms and the weights after 3 clipped AdamW
// steps, relative error ≤ 1e-5 apart from float-noise elements, _trained.ts): --pp 2 and --pp 4
// under each schedule with 8 microbatches, PP 2 × DDP 2, × FSDP 2, × TP 2 and PP × FSDP × TP
// (2 × 2 × 2, --ac full); a PP 2 snapshot stopped at step 3
// resumes at PP 1 and at PP 4, ending where an uninterrupted run does; layouts the job cannot
// pipeline are refused before any process starts.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { assertSucceeded, readModelFile, readSaved, smallCorpus, train } from "./_train.ts";
import {
  assertStepsClose,
  assertTrainedClose,
  gradientOf,
  type Gradients,
  steps,
  type Weights,
} from "./_trained.ts";

/** Below every step's total gradient norm (checked), so that clipping acts. */
const CLIP = "0.5";

/**
 * A tiny GPT of 8 blocks (8 stages under interleaved --pp 4) at a constant lr of 0.002 (AdamW
 * moves every weight by about that each step, so that a wrong gradient shows, while an element
 * whose gradient is near zero, stepped by rounding, stays within 1e-5), every step logged;
 * without biases, whose key third has no gradient (AdamW steps it by rounding, _trained.ts).
 */
async function ppJob(dir: string): Promise<string[]> {
  return [
    ...["--model", "gpt", "--n-layer", "8", "--n-head", "4", "--n-embd", "32", "--block-size"],
    ...["16", "--threads", "1", "--epochs", "1", "--lr-schedule", "constant", "--lr", "0.002"],
    ...["--log-every", "1", "--bias", "false", "--data-root", await smallCorpus(dir)],
  ];
}
const ONE = ["--nproc-per-node", "1", "--batch-size", "16"];
const pipeline = (pp: number, schedule: string) => [
  ...["--nproc-per-node", String(pp), "--pp", String(pp), "--pp-schedule", schedule],
  ...["--microbatches", "8", "--batch-size", "16"],
];

/**
 * Runs the job in `dir/name` to `to` steps, every rank dumping its final (whole) weights there,
 * and returns them; `resumes`: whether it must resume from a snapshot already in its folder.
 */
async function run(dir: string, name: string, args: string[], to = 3, resumes = false) {
  const out = join(dir, name);
  await Deno.mkdir(out, { recursive: true });
  const sharded = args.includes("--pp") || args.includes("fsdp");
  const result = await train([
    ...args,
    ...["--max-steps", String(to), "--master-port", String(freePort())],
    ...["--snapshot", join(out, sharded ? "snap" : "snap.safetensors")],
  ], { timeoutMs: 60_000, env: { DTRAIN_WEIGHTS_DUMP: out } });
  assertSucceeded(result);
  assert.equal(/resuming from/.test(result.stdout), resumes, `${name}: resumed?\n${result.stdout}`);
  assert.match(result.stdout, new RegExp(`done: 0 epochs and step ${to} \\(--max-steps ${to}\\)`));
  assert.match(result.stdout, /validation loss \d/);
  const dumps = [...Deno.readDirSync(out)].filter((e) => /^rank\d+\.safetensors$/.test(e.name));
  return dumps.map((e) => readSaved(join(out, e.name)).tensors as Weights);
}

/** One process's first-step gradient on the global batch, from two plain SGD steps. */
async function firstGradient(dir: string, job: string[]): Promise<Gradients> {
  const sgd = ["--optimizer", "sgd", "--momentum", "0", "--weight-decay", "0"];
  const at = (lr: number) => run(dir, `sgd${lr}`, [...job, ...ONE, ...sgd, "--lr", `${lr}`], 1);
  const [[atLr], [at2Lr]] = [await at(10), await at(20)];
  return gradientOf(atLr, at2Lr, 10);
}

/** Fails unless every rank's weights are one process's; returns the worst relative error. */
function assertAllClose(ranks: Weights[], want: Weights, grad0: Gradients, what: string): number {
  let worst = 0;
  for (const [r, w] of ranks.entries()) {
    worst = Math.max(worst, assertTrainedClose(w, want, grad0, `${what}, rank ${r}`).error);
  }
  return worst;
}

Deno.test("train --pp 2 under GPipe, 1F1B and Interleaved 1F1B, --pp 4 under 1F1B, PP 2 × DDP 2, × FSDP 2, × TP 2 and 3-D (2 × 2 × 2), train a GPT to one process's losses, norms and weights after 3 clipped AdamW steps", async () => {
  await withTempDir("dtrain_pp_train_", async (dir) => {
    const unclipped = await ppJob(dir), job = [...unclipped, "--grad-clip", CLIP];
    const grad0 = await firstGradient(dir, unclipped);
    const [reference] = await run(dir, "one", [...job, ...ONE]);
    for (const s of await steps(join(dir, "one"))) assert.ok(s.gradNorm > Number(CLIP));
    const layouts: [string, string[], number][] = [];
    // Every schedule at PP 2, and 1F1B at PP 4: the library's tests (tests/parallel/pipeline_test)
    // run every schedule at 2 and 4 stages; the job's part is the same for all of them.
    for (const schedule of ["gpipe", "1f1b", "interleaved"]) {
      layouts.push([`--pp 2 ${schedule}`, pipeline(2, schedule), 2]);
    }
    layouts.push(["--pp 4 1f1b", pipeline(4, "1f1b"), 4]);
    const [pp2, noSp] = [["--pp", "2", "--microbatches", "4", "--batch-size", "8"], [
      ...["--sequence-parallel", "false", "--loss-parallel", "false"],
    ]];
    layouts.push(
      ["PP 2 × DDP 2", ["--nproc-per-node", "4", ...pp2], 4],
      ["PP 2 × FSDP 2", ["--nproc-per-node", "4", "--strategy", "fsdp", ...pp2], 4],
      ["PP 2 × TP 2", [
        ...["--nproc-per-node", "4", "--pp", "2", "--tp", "2", "--microbatches", "8"],
        ...["--batch-size", "16", ...noSp],
      ], 4],
      [
        "PP 2 × FSDP 2 × TP 2, --ac full",
        [
          ...["--nproc-per-node", "8", "--strategy", "fsdp", "--tp", "2", ...pp2, ...noSp],
          "--ac",
          "full",
        ],
        8,
      ],
    );
    for (const [k, [label, flags, ranks]] of layouts.entries()) {
      const weights = await run(dir, `layout${k}`, [...job, ...flags]);
      assert.equal(weights.length, ranks, label);
      const worst = assertAllClose(weights, reference, grad0, label);
      await assertStepsClose(join(dir, `layout${k}`), join(dir, "one"), label);
      console.log(`${label}: worst relative error ${worst.toExponential(1)}`);
    }
    // The final model.safetensors is the whole model.
    const whole = readModelFile(join(dir, "layout0", "model.safetensors")).tensors as Weights;
    assertTrainedClose(whole, reference, grad0, "--pp 2 model.safetensors");
  });
});

Deno.test("train --pp 2 stopped at step 3 resumes from its sharded snapshot at PP 1 and at PP 4, ending where an uninterrupted run does", async () => {
  await withTempDir("dtrain_pp_resume_", async (dir) => {
    const unclipped = await ppJob(dir), job = [...unclipped, "--grad-clip", CLIP];
    const grad0 = await firstGradient(dir, unclipped);
    const [straight] = await run(dir, "straight", [...job, ...ONE], 5);
    await run(dir, "first", [...job, ...pipeline(2, "1f1b")], 3);
    const resumes: [string, string[]][] = [
      // One process reads the sharded folder as a --strategy fsdp run (a ddp run's is a file).
      ["pp1", [...ONE, "--strategy", "fsdp"]],
      ["pp4", pipeline(4, "1f1b")],
    ];
    for (const [name, flags] of resumes) {
      await Deno.mkdir(join(dir, name));
      const cp = ["-r", join(dir, "first", "snap"), join(dir, name)];
      assert.ok((await new Deno.Command("cp", { args: cp }).output()).success);
      const weights = await run(dir, name, [...job, ...flags], 5, true);
      const worst = assertAllClose(weights, straight, grad0, `resumed at ${name}`);
      await assertStepsClose(join(dir, name), join(dir, "straight"), `resumed at ${name}`);
      console.log(`resumed at ${name}: worst relative error ${worst.toExponential(1)}`);
    }
  });
});

Deno.test("train refuses a pipeline that does not fit before any process starts: degrees, layers per stage, microbatches, the model, and settings not yet composed with --pp", async () => {
  await withTempDir("dtrain_pp_refused_", async (dir) => {
    const job = [...await ppJob(dir), "--snapshot", join(dir, "s", "snap")];
    const cases: [string[], RegExp][] = [
      [
        ["--nproc-per-node", "3", "--pp", "2"],
        /pp × tp × dpReplicate × dpShard: --pp 2 × --tp 1 × --dp-shard 1 does not divide the world size \(3 processes/,
      ],
      [
        ["--nproc-per-node", "4", "--pp", "2", "--dp-replicate", "3"],
        /--pp 2 × --tp 1 × --dp-replicate 3 × --dp-shard 1 = 6 must equal the world size \(4/,
      ],
      [
        ["--nproc-per-node", "3", "--pp", "3"],
        /--n-layer: must be a multiple of the pipeline's 3 stages, so that each holds as many blocks, got 8/,
      ],
      [
        ["--nproc-per-node", "4", "--pp", "4", "--n-layer", "4", "--pp-schedule", "interleaved"],
        /--n-layer: must be a multiple of the pipeline's 8 stages \(2 per rank under --pp-schedule interleaved\)/,
      ],
      [
        ["--nproc-per-node", "2", "--pp", "2", "--microbatches", "3", "--batch-size", "16"],
        /--batch-size: must be a multiple of the 3 microbatches, got 16/,
      ],
      [
        ["--nproc-per-node", "4", "--pp", "4", "--batch-size", "6"],
        /--batch-size: must be a multiple of the 4 microbatches \(--microbatches defaults to --pp\)/,
      ],
      [
        ["--nproc-per-node", "4", "--pp", "4", "--microbatches", "2"],
        /microbatches: --pp-schedule 1f1b needs at least one microbatch per stage \(4\), got 2/,
      ],
      [
        [
          ...["--nproc-per-node", "4", "--pp", "4", "--microbatches", "6"],
          ...["--pp-schedule", "interleaved", "--batch-size", "12"],
        ],
        /microbatches: --pp-schedule interleaved runs rounds of --pp \(4\) microbatches: it must be a multiple of 4, got 6/,
      ],
      [["--nproc-per-node", "1", "--microbatches", "4"], /microbatches: .* needs --pp above 1/],
      [
        ["--nproc-per-node", "2", "--pp", "2", "--model", "mlp", "--dataset", "synthetic"],
        /pp: pipeline stages split --model gpt only, got mlp/,
      ],
      [
        ["--nproc-per-node", "4", "--pp", "2", "--tp", "2"],
        /--sequence-parallel: --sequence-parallel true \(the default; give --sequence-parallel false\) does not compose with --pp in the train job yet/,
      ],
      [
        ["--nproc-per-node", "2", "--pp", "2", "--dtype", "bf16"],
        /dtype: --dtype bf16 does not compose with --pp in the train job yet/,
      ],
    ];
    for (const [flags, message] of cases) {
      const result = await train([...job, ...flags], { timeoutMs: 30_000 });
      assert.equal(result.code, 2, `${flags.join(" ")}: exit ${result.code}\n${result.stderr}`);
      assert.match(result.stderr, message, `${flags.join(" ")}: ${result.stderr}`);
      assert.doesNotMatch(result.stdout, /step 1/);
    }
  });
});
