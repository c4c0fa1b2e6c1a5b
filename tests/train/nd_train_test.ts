// The train job's N-D flags as real processes under the launcher, each against one process on the
// same global batches of 16 (losses, clipGradNorm's total norms and the weights after 3 clipped
// AdamW steps, relative error ≤ 1e-5 apart from float-noise elements, _trained.ts): --tp 2 on 2
// ranks, TP 2 × FSDP 2 and HSDP 2 × 2 on 4, HSDP × TP (2 × 2 × 2, with --ac full) on 8; --ac full
// trains to --ac none's bit for bit; a TP 2 × FSDP 2 run stopped at step 3 resumes exactly, and on
// other layouts; degrees that do not fit the world size, a --tp that does not divide nHead and
// --dp-shard under DDP are refused before any process starts.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, withTempDir } from "../_harness/processes.ts";
import { relativeError } from "../_harness/close.ts";
import { freePort } from "../_harness/ranks.ts";
import {
  assertBitIdentical,
  assertSucceeded,
  launchHooked,
  readSaved,
  smallCorpus,
  train,
} from "./_train.ts";
import {
  assertStepsClose,
  assertTrainedClose,
  gradientOf,
  type Gradients,
  steps,
  TOLERANCE,
  type Weights,
} from "./_trained.ts";

/** The total gradient norm clipped to: below every step's (checked), so that clipping acts. */
const CLIP = 0.5;

/**
 * A tiny GPT at a constant learning rate of 0.01 (AdamW's steps move every weight, so that a
 * wrong gradient shows), every step logged; `--batch-size` is the caller's.
 */
async function gptJob(dir: string): Promise<string[]> {
  return [
    ...["--model", "gpt", "--n-layer", "2", "--n-head", "4", "--n-embd", "32"],
    ...["--block-size", "16", "--threads", "1", "--epochs", "1", "--lr-schedule", "constant"],
    ...["--lr", "0.01", "--log-every", "1", "--data-root", await smallCorpus(dir)],
  ];
}
const CLIPPED = ["--grad-clip", String(CLIP)];
const ONE = ["--nproc-per-node", "1", "--batch-size", "16"];
const TP_FSDP = [
  ...["--nproc-per-node", "4", "--strategy", "fsdp", "--tp", "2", "--dp-shard", "2"],
  ...["--batch-size", "8"],
];

/**
 * Runs the job in `dir/name` to `steps` steps (the job's 3 unless given), each rank dumping its
 * final (whole) weights there; `resumes`: the run must resume from a snapshot already in its folder.
 */
async function run(
  dir: string,
  name: string,
  args: string[],
  steps = 3,
  resumes = false,
): Promise<Weights[]> {
  const out = join(dir, name);
  await Deno.mkdir(out, { recursive: true });
  const snapshot = args.includes("fsdp") || args.includes("--tp") ? "snap" : "snap.safetensors";
  const result = await train(
    [
      ...args,
      ...["--max-steps", String(steps), "--master-port", String(freePort())],
      ...["--snapshot", join(out, snapshot)],
    ],
    { timeoutMs: 60_000, env: { DTRAIN_WEIGHTS_DUMP: out } },
  );
  assertSucceeded(result);
  assert.equal(/resuming from/.test(result.stdout), resumes, `${name}: resumed?\n${result.stdout}`);
  assert.match(
    result.stdout,
    new RegExp(`done: 0 epochs and step ${steps} \\(--max-steps ${steps}\\)`),
  );
  assert.match(result.stdout, /sample:\n/);
  const ranks = [...Deno.readDirSync(out)].filter((e) => /^rank\d+\.safetensors$/.test(e.name));
  return ranks.map((e) => readSaved(join(out, e.name)).tensors);
}

/** Plain SGD (no momentum or weight decay): one step moves each weight by `lr` times its gradient. */
const SGD = ["--optimizer", "sgd", "--momentum", "0", "--weight-decay", "0"];

/** One process's first-step gradient on the global batch of 16 (see `gradientOf`). */
async function firstGradient(dir: string, job: string[]): Promise<Gradients> {
  const at = (lr: number) => run(dir, `sgd${lr}`, [...job, ...ONE, ...SGD, "--lr", `${lr}`], 1);
  const [[atLr], [at2Lr]] = [await at(10), await at(20)];
  return gradientOf(atLr, at2Lr, 10);
}

/**
 * Fails unless one clipped SGD step at lr 10 moved each weight by `--grad-clip / norm` of the
 * unclipped step (`sgd10`, which `firstGradient` ran, as did its norm), as `clip_grad_norm_` does.
 */
async function assertClips(dir: string, job: string[], grad0: Gradients): Promise<void> {
  const [clipped] = await run(
    dir,
    "clipped",
    [...job, ...ONE, ...SGD, "--lr", "10", ...CLIPPED],
    1,
  );
  const [unclipped] = [readSaved(join(dir, "sgd10", "rank0.safetensors")).tensors];
  const [{ gradNorm }] = await steps(join(dir, "sgd10"));
  const coef = CLIP / (gradNorm + 1e-6);
  assert.ok(coef < 1, `the norm ${gradNorm} is above the clip`);
  for (const [name, w] of Object.entries(unclipped)) {
    const want = w.map((v, i) => v + 10 * grad0[name][i] * (1 - coef));
    const error = relativeError(clipped[name], want);
    assert.ok(error <= TOLERANCE, `--grad-clip: ${name} has relative error ${error}`);
  }
}

Deno.test("train --tp 2, TP 2 × FSDP 2, HSDP 2 × 2 and HSDP × TP (2 × 2 × 2, --ac full) train a GPT to one process's losses, norms and weights after 3 clipped AdamW steps; --ac full to --ac none's", async () => {
  await withTempDir("dtrain_nd_train_", async (dir) => {
    const job = await gptJob(dir);
    const grad0 = await firstGradient(dir, job);
    await assertClips(dir, job, grad0);
    const [reference] = await run(dir, "one", [...job, ...CLIPPED, ...ONE]);
    for (const { gradNorm } of await steps(join(dir, "one"))) assert.ok(gradNorm > CLIP);
    const layouts: [string, string[], number][] = [
      ["--tp 2", ["--nproc-per-node", "2", "--tp", "2", "--batch-size", "16"], 2],
      ["TP 2 × FSDP 2", TP_FSDP, 4],
      ["HSDP 2 × 2", [
        ...["--nproc-per-node", "4", "--strategy", "fsdp", "--dp-replicate", "2"],
        ...["--dp-shard", "2", "--batch-size", "4"],
      ], 4],
      ["HSDP × TP 2 × 2 × 2, --ac full", [
        ...["--nproc-per-node", "8", "--strategy", "fsdp", "--dp-replicate", "2"],
        ...["--dp-shard", "2", "--tp", "2", "--batch-size", "4", "--ac", "full"],
      ], 8],
    ];
    for (const [[label, flags, ranks], k] of layouts.map((l, k) => [l, k] as const)) {
      const name = `layout${k}`;
      const weights = await run(dir, name, [...job, ...CLIPPED, ...flags]);
      assert.equal(weights.length, ranks, label);
      let worst = { error: 0, name: "" };
      for (const [r, w] of weights.entries()) {
        const e = assertTrainedClose(w, reference, grad0, `${label}, rank ${r}`);
        if (e.error > worst.error) worst = e;
      }
      await assertStepsClose(join(dir, name), join(dir, "one"), label);
      console.log(`${label}: worst relative error ${worst.error.toExponential(1)} (${worst.name})`);
    }
    const [ac] = await run(dir, "ac", [...job, ...CLIPPED, ...ONE, "--ac", "full"]);
    assertBitIdentical(ac, reference, "--ac full");
  });
});

Deno.test("train refuses degrees that do not fit the world size, a --tp that does not divide nHead, and --dp-shard under ddp, before any process starts", async () => {
  await withTempDir("dtrain_nd_refused_", async (dir) => {
    const job = [...await gptJob(dir), "--batch-size", "8", "--snapshot", join(dir, "s", "snap")];
    const cases: [string[], RegExp][] = [
      [
        [
          ...["--nproc-per-node", "4", "--strategy", "fsdp", "--tp", "1"],
          ...["--dp-replicate", "3", "--dp-shard", "2"],
        ],
        /tp × dpReplicate × dpShard: --tp 1 × --dp-replicate 3 × --dp-shard 2 = 6 must equal the world size \(4 processes: --nproc-per-node 4 × --nnodes 1\)/,
      ],
      [["--nproc-per-node", "4", "--tp", "3"], /tp: must divide nHead \(4\)/],
      [
        ["--nproc-per-node", "2", "--dp-shard", "2"],
        /--dp-shard: 2 shards the parameters, which is --strategy fsdp/,
      ],
      [
        ["--nproc-per-node", "3", "--tp", "2", "--n-head", "2", "--n-embd", "32"],
        /--tp 2 × --dp-shard 1 does not divide the world size \(3 processes/,
      ],
    ];
    for (const [flags, message] of cases) {
      const result = await train([...job, ...flags], { timeoutMs: 30_000 });
      assert.equal(result.code, 2, `${flags.join(" ")}: exit ${result.code}\n${result.stderr}`);
      assert.match(result.stderr, message);
      assert.doesNotMatch(result.stdout, /step 1/);
    }
  });
});

Deno.test("train TP 2 × FSDP 2 stopped at step 3 resumes from its sharded snapshot exactly, and at --tp 2 (DDP) and in one process, ending where an uninterrupted run does", async () => {
  await withTempDir("dtrain_nd_resume_", async (dir) => {
    const job = [...await gptJob(dir), ...CLIPPED];
    const [straight] = await run(dir, "straight", [...job, ...TP_FSDP], 5);
    await run(dir, "first", [...job, ...TP_FSDP], 3);
    const resumes: [string, string[]][] = [
      ["again", TP_FSDP],
      ["tp", ["--nproc-per-node", "2", "--tp", "2", "--batch-size", "16"]],
      // One process reads the sharded folder as a --strategy fsdp run (a ddp run's is a file).
      ["one", [...ONE, "--strategy", "fsdp"]],
    ];
    // Each resume gets a copy of the step-3 snapshot, so that none sees another's.
    for (const [to] of resumes) {
      await Deno.mkdir(join(dir, to));
      const cp = ["-r", join(dir, "first", "snap"), join(dir, to)];
      assert.ok((await new Deno.Command("cp", { args: cp }).output()).success);
    }
    const grad0 = await firstGradient(dir, job);
    for (const [name, flags] of resumes) {
      const weights = await run(dir, name, [...job, ...flags], 5, true);
      let worst = 0;
      for (const [r, w] of weights.entries()) {
        const what = `resumed ${name}, rank ${r}`;
        // The same layout sums in the same order: the same bits as the run never stopped.
        if (name === "again") assertBitIdentical(w, straight, what);
        else worst = Math.max(worst, assertTrainedClose(w, straight, grad0, what).error);
      }
      console.log(`resumed ${name}: worst relative error ${worst.toExponential(1)}`);
      await assertStepsClose(join(dir, name), join(dir, "straight"), `resumed ${name}`);
    }
  });
});

Deno.test("a rank SIGKILLed in a --tp 2 job makes the other fail in its blocking collective, diagnosed: the rank is named as dead and the flight recorder reports", async () => {
  await withTempDir("dtrain_tp_kill_", async (dir) => {
    const run = await launchHooked(
      ["--nproc-per-node", "2"],
      [
        ...await gptJob(dir),
        ...["--tp", "2", "--batch-size", "16", "--max-steps", "3"],
        ...["--snapshot", join(dir, "snap")],
      ],
      { env: { DTRAIN_TEST_CRASH_RANK: "1", DTRAIN_TEST_CRASH_AT_STEP: "1" } },
    );
    assert.notEqual(run.code, 0, run.stderr);
    assert.deepEqual(run.leftovers, [], `left behind: ${describe(run.leftovers)}`);
    assert.match(run.stderr, /rank 1: fault injection: SIGKILL before step 1/);
    // Rank 0's error: the transport's, then the store's verdict (the train job's diagnoseError).
    assert.match(
      run.stderr,
      /\[rank 0\].*rank 1 died \(left the store without reporting an error\)/,
      run.stderr,
    );
    assert.match(run.stderr, /\[rank 0\] dtrain ledger \(rank 0\): /, run.stderr);
  });
});
