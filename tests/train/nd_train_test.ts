// The train job's N-D flags as real processes under the launcher: --tp 2 on 2 ranks and HSDP
// (--dp-replicate 2 --dp-shard 2) on 4 train a GPT to one process's losses and weights on the same
// global batches; --ac full trains to --ac none's; degrees that do not fit the world size, a --tp
// that does not divide nHead and --dp-shard under DDP are refused before any process starts.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import type { MetricRecord } from "../../src/train/metrics.ts";
import { assertClose, assertSucceeded, readSaved, smallCorpus, train } from "./_train.ts";

type Weights = Record<string, Float32Array | Int32Array>;
/**
 * The weights' tolerance after 3 AdamW steps: its first steps divide each gradient by its own
 * size, so a bias gradient near 0, summed in another order across ranks, moves its bias by up to
 * 1e-4 relative (the losses agree to 1e-5); a misplaced shard or batch would move it by ~1.
 */
const WEIGHTS = 1e-3;

/** The step losses of a run's metrics.jsonl. */
async function stepLosses(dir: string): Promise<number[]> {
  return (await Deno.readTextFile(join(dir, "metrics.jsonl"))).trim().split("\n")
    .map((l) => JSON.parse(l) as MetricRecord).filter((r) => r.kind === "step").map((r) => r.loss);
}

function assertLossesClose(actual: number[], expected: number[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: steps`);
  actual.forEach((l, i) =>
    assert.ok(Math.abs(l - expected[i]) <= 1e-5 * Math.abs(expected[i]), `${what}: step ${i}`)
  );
}

/** A tiny GPT for 3 steps, every step logged; `--batch-size` is the caller's. */
async function gptJob(dir: string): Promise<string[]> {
  return [
    ...["--model", "gpt", "--n-layer", "2", "--n-head", "4", "--n-embd", "32"],
    ...["--block-size", "16", "--threads", "1", "--epochs", "1"],
    ...["--log-every", "1", "--data-root", await smallCorpus(dir)],
  ];
}

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

Deno.test("train --tp 2 on 2 ranks, and HSDP 2 × 2 on 4, train a GPT to one process's losses and weights; --ac full to --ac none's", async () => {
  await withTempDir("dtrain_nd_train_", async (dir) => {
    const job = await gptJob(dir);
    const one = ["--nproc-per-node", "1"];
    // --tp 2: one data-parallel rank, so the batches of one process of the same batch size.
    const [reference] = await run(dir, "one", [...job, ...one, "--batch-size", "8"]);
    const tp = await run(dir, "tp", [
      ...job,
      "--nproc-per-node",
      "2",
      "--tp",
      "2",
      "--batch-size",
      "8",
    ]);
    assert.equal(tp.length, 2);
    tp.forEach((w, r) => assertClose(w, reference, `--tp 2, rank ${r}`, WEIGHTS));
    assertLossesClose(await stepLosses(join(dir, "tp")), await stepLosses(join(dir, "one")), "tp");

    // HSDP: 4 dp ranks of 8 samples each are one process's batches of 32.
    const [wide] = await run(dir, "one32", [...job, ...one, "--batch-size", "32"]);
    const hsdp = await run(dir, "hsdp", [
      ...job,
      ...["--nproc-per-node", "4", "--strategy", "fsdp", "--dp-replicate", "2", "--dp-shard", "2"],
      ...["--batch-size", "8"],
    ]);
    assert.equal(hsdp.length, 4);
    hsdp.forEach((w, r) => assertClose(w, wide, `HSDP 2 × 2, rank ${r}`, WEIGHTS));
    const wideLosses = await stepLosses(join(dir, "one32"));
    assertLossesClose(await stepLosses(join(dir, "hsdp")), wideLosses, "hsdp");

    const [ac] = await run(dir, "ac", [...job, ...one, "--batch-size", "32", "--ac", "full"]);
    assertClose(ac, wide, "--ac full", 0);
    assertLossesClose(await stepLosses(join(dir, "ac")), wideLosses, "ac");
  });
});

Deno.test("train refuses degrees that do not fit the world size, a --tp that does not divide nHead, and --dp-shard under ddp, before any process starts", async () => {
  await withTempDir("dtrain_nd_refused_", async (dir) => {
    const job = [...await gptJob(dir), "--batch-size", "8", "--snapshot", join(dir, "s", "snap")];
    const cases: [string[], RegExp][] = [
      [
        [
          "--nproc-per-node",
          "4",
          "--strategy",
          "fsdp",
          "--tp",
          "1",
          "--dp-replicate",
          "3",
          "--dp-shard",
          "2",
        ],
        /tp × dpReplicate × dpShard: --tp 1 × --dp-replicate 3 × --dp-shard 2 = 6 must equal the world size \(4 processes: --nproc-per-node 4 × --nnodes 1\)/,
      ],
      [
        ["--nproc-per-node", "4", "--tp", "3"],
        /tp: must divide nHead \(4\)/,
      ],
      [
        ["--nproc-per-node", "2", "--dp-shard", "2"],
        /dpShard: 2 shards the parameters, which is --strategy fsdp/,
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

Deno.test("train --tp 2 stopped at step 3 resumes from its sharded snapshot at --tp 2 and at --tp 1, ending where an uninterrupted --tp 2 run does", async () => {
  await withTempDir("dtrain_nd_resume_", async (dir) => {
    const job = [...await gptJob(dir), "--batch-size", "8"];
    const tp = [...job, "--nproc-per-node", "2", "--tp", "2"];
    const [straight] = await run(dir, "straight", tp, 5);
    await run(dir, "first", tp, 3);
    // Each resume gets a copy of the step-3 snapshot, so the second does not see the first's.
    for (const to of ["again", "one"]) await Deno.mkdir(join(dir, to));
    for (const to of ["again", "one"]) {
      await new Deno.Command("cp", { args: ["-r", join(dir, "first", "snap"), join(dir, to)] })
        .output();
    }
    const again = await run(dir, "again", tp, 5, true);
    again.forEach((w, r) => assertClose(w, straight, `resumed at --tp 2, rank ${r}`, 1e-6));
    // One process reads the sharded folder as a --strategy fsdp run (a ddp run's snapshot is a file).
    const single = [...job, "--nproc-per-node", "1", "--strategy", "fsdp"];
    const [one] = await run(dir, "one", single, 5, true);
    assertClose(one, straight, "resumed at --tp 1", WEIGHTS);
  });
});
