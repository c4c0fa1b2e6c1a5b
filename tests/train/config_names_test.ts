// Config errors name what the user typed (the flag, or the key of the config file that set it),
// and gradient accumulation is nanoGPT's: the global count of micro-steps, divided by the
// data-parallel size, whose default works on any world size.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";
import { assertSucceeded, train } from "./_train.ts";
import { unprefixed, writeCharData } from "./_tokens.ts";

function parsed(args: string[]): TrainConfig {
  const config = parseTrainArgs(args);
  assert.ok(config !== "help");
  return config;
}

function refusal(args: string[]): string {
  try {
    parseTrainArgs(args);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`${args.join(" ")} was accepted`);
}

const TOKENS = ["--dataset", "tokens", "--data-dir", "d"];

Deno.test("every kind of config error names the flag, or the config file's key that set the field", async () => {
  const byFlag: [string[], RegExp][] = [
    [["--batch-size", "0"], /^--batch-size: Too small/], // the schema's
    [["--batch-size", "lots"], /^--batch-size: expected a number/], // a number's
    [["--bias", "yes"], /^--bias: expected true or false/], // a boolean's
    [["--n-head", "7"], /^--n-head: must divide --n-embd \(160\), got 7$/], // a check across fields
    [["--epochs", "2", ...TOKENS], /^--epochs: is for epoch-based training/], // the wrong kind
    [["--nnodes", "0:2"], /^--nnodes: MIN must be at least 1/], // a field with no flag of its own
    [
      [...TOKENS, "--nproc-per-node", "2", "--gradient-accumulation-steps", "3"],
      /^--gradient-accumulation-steps: must be a multiple of the world size \(2 processes\)/,
    ],
  ];
  for (const [args, message] of byFlag) assert.match(refusal(args), message, args.join(" "));
  await withTempDir("dtrain_config_names_", async (dir) => {
    const json = join(dir, "job.json");
    await Deno.writeTextFile(json, JSON.stringify({ batchSize: 0, epochs: 1 }));
    assert.equal(
      refusal(["--config", json]),
      `batchSize in ${json}: Too small: expected number to be >0 (got 0)`,
    );
    // A flag overrides the file, and is then what the error names.
    assert.match(refusal(["--config", json, "--batch-size", "-1"]), /^--batch-size: Too small/);
    const py = join(dir, "train_x.py");
    await Deno.writeTextFile(
      py,
      "dataset = 'x'\nbatch_size = 8\ngradient_accumulation_steps = 3\n",
    );
    assert.equal(
      refusal(["--config", py, "--nproc-per-node", "2"]),
      `gradient_accumulation_steps in ${py}:3: must be a multiple of the world size (2 ` +
        `processes): as nanoGPT's train.py, it counts the micro-steps of an iteration over all ` +
        `ranks, and each runs 1/2 of them; 2 or 4 would work (left unset, it is 2), got 3`,
    );
    await Deno.writeTextFile(py, "dataset = 'x'\nn_head = 7\n");
    assert.match(refusal(["--config", py]), new RegExp(`^n_head in ${py}:2: must divide --n-embd`));
  });
});

Deno.test("gradient accumulation left unset is one micro-step per data-parallel rank on 1, 2 and 3 processes", () => {
  for (const processes of [1, 2, 3]) {
    const config = parsed([...TOKENS, "--nproc-per-node", String(processes)]);
    assert.equal(config.gradientAccumulationSteps, processes);
  }
  // Set, it is nanoGPT's global count: kept, and each of the 2 ranks runs 4 / 2 micro-steps.
  assert.equal(
    parsed([...TOKENS, "--nproc-per-node", "2", "--gradient-accumulation-steps", "4"])
      .gradientAccumulationSteps,
    4,
  );
  assert.match(
    refusal([...TOKENS, "--nproc-per-node", "4", "--gradient-accumulation-steps", "6"]),
    /; 4 or 8 would work \(left unset, it is 4\), got 6$/,
  );
  assert.match(
    refusal([...TOKENS, "--nproc-per-node", "4", "--gradient-accumulation-steps", "2"]),
    /; 4 would work \(left unset, it is 4\), got 2$/,
  );
  // On a rank of an elastic job the world size is the launcher's WORLD_SIZE, not MAX nodes.
  Deno.env.set("RANK", "0");
  Deno.env.set("WORLD_SIZE", "3");
  try {
    assert.equal(parsed([...TOKENS, "--nnodes", "1:2"]).gradientAccumulationSteps, 3);
  } finally {
    Deno.env.delete("RANK");
    Deno.env.delete("WORLD_SIZE");
  }
});

Deno.test("a 2-process token run trains with the defaults, and with a global count as nanoGPT's", async () => {
  await withTempDir("dtrain_accumulation_", async (dir) => {
    const data = join(dir, "data");
    await writeCharData(data);
    const job = [
      ...["--dataset", "tokens", "--data-dir", data, "--out-dir", join(dir, "out")],
      ...["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16"],
      ...["--batch-size", "4", "--threads", "1", "--max-iters", "2", "--eval-interval", "2"],
      ...["--eval-iters", "1", "--warmup-iters", "1", "--lr-decay-iters", "2"],
      ...["--nproc-per-node", "2"],
    ];
    // nanoGPT's tokens_per_iter: micro-steps over all ranks × batch 4 × block 16; left unset,
    // one micro-step per rank (2), and 4 given is 2 on each rank.
    for (
      const [extra, tokens] of [[[], 128], [["--gradient-accumulation-steps", "4"], 256]] as const
    ) {
      const run = await train([...job, ...extra], { timeoutMs: 120_000 });
      assertSucceeded(run);
      const want = new RegExp(`^tokens per iteration will be: ${tokens}$`, "m");
      assert.match(unprefixed(run.stdout), want, run.stdout);
    }
  });
});
