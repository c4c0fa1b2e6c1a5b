// Reading nanoGPT's config files (`--config FILE.py`): its real config/train_shakespeare_char.py
// (when the shared data has it) and a copy of its text, the override order (defaults, file,
// flags), the lead's headline command line, and the lines and keys that are refused.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { ROOT, withTempDir } from "../_harness/processes.ts";
import { parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";
import { parseNanoGptConfig } from "../../src/train/nanogpt_config.ts";
import { getLr } from "../../src/train/_nanogpt.ts";
import { SHAKESPEARE_CHAR } from "./_nanogpt_config.ts";

/** The shared copy of nanoGPT's file, beside the checkout (or beside its worktrees' folder). */
const REAL = ["..", join("..", "..")].map((up) =>
  join(ROOT, up, "shared", "data", "nanogpt", "train_shakespeare_char.py")
).find(existsSync);

/** Fails unless `fn` throws an error whose message matches `message`. */
function assertThrowsMessage(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (e: Error) => {
    assert.match(e.message, message);
    return true;
  });
}

function parsed(args: string[], notes: string[] = []): TrainConfig {
  const config = parseTrainArgs(args, notes);
  assert.ok(config !== "help");
  return config;
}

/** Checks what train_shakespeare_char.py sets, with nanoGPT's train.py defaults for the rest. */
function assertShakespeareChar(config: TrainConfig, notes: string[]): void {
  assert.equal(config.dataset, "tokens");
  assert.equal(config.model, "gpt");
  // Relative paths are the user's, resolved from the folder they ran the job in.
  assert.equal(config.dataDir, resolve("data", "shakespeare_char"));
  assert.equal(config.snapshot, resolve("out-shakespeare-char", "snapshot.safetensors"));
  const want: Partial<TrainConfig> = {
    evalInterval: 250,
    evalIters: 200,
    logInterval: 10,
    alwaysSaveCheckpoint: false,
    gradientAccumulationSteps: 1,
    batchSize: 64,
    blockSize: 256,
    nLayer: 6,
    nHead: 6,
    nEmbd: 384,
    dropout: 0.2,
    lr: 1e-3,
    maxIters: 5000,
    lrDecayIters: 5000,
    minLr: 1e-4,
    beta2: 0.99,
    warmupIters: 100,
    // train.py's defaults, which the file keeps
    beta1: 0.9,
    weightDecay: 0.1,
    gradClip: 1,
    bias: false,
    decayLr: true,
    initFrom: "scratch",
    optimizer: "adamw",
    nprocPerNode: 1,
  };
  for (const [key, value] of Object.entries(want)) {
    assert.equal(config[key as keyof TrainConfig], value, key);
  }
  assert.equal(notes.length, 3, notes.join("\n"));
  assert.ok(notes.every((n) => /:1[234]: wandb_\w+ ignored/.test(n)), notes.join("\n"));
}

Deno.test({
  name: "nanoGPT's own config/train_shakespeare_char.py parses",
  ignore: REAL === undefined, // shared/data/nanogpt is not beside this checkout
  fn: () => {
    const notes: string[] = [];
    assertShakespeareChar(parsed(["--config", REAL!], notes), notes);
    assert.equal(Deno.readTextFileSync(REAL!), SHAKESPEARE_CHAR, "the copy below is the file");
  },
});

Deno.test("a copy of train_shakespeare_char.py parses; flags override it; the headline run is accepted", async () => {
  await withTempDir("dtrain_nanogpt_config_", async (dir) => {
    const file = join(dir, "train_shakespeare_char.py");
    await Deno.writeTextFile(file, SHAKESPEARE_CHAR);
    const notes: string[] = [];
    assertShakespeareChar(parsed(["--config", file], notes), notes);

    const data = join(dir, "shakespeare_char");
    const headline = parsed([
      "--config",
      file,
      "--device",
      "cpu",
      "--eval-iters",
      "20",
      "--log-interval",
      "1",
      "--block-size",
      "64",
      "--batch-size",
      "12",
      "--n-layer",
      "4",
      "--n-head",
      "4",
      "--n-embd",
      "128",
      "--max-iters",
      "2000",
      "--lr-decay-iters",
      "2000",
      "--dropout",
      "0",
      "--data-dir",
      data,
    ]); // deno-fmt-ignore
    const fromFlags: Partial<TrainConfig> = {
      device: "cpu",
      evalIters: 20,
      logInterval: 1,
      blockSize: 64,
      batchSize: 12,
      nLayer: 4,
      nHead: 4,
      nEmbd: 128,
      maxIters: 2000,
      lrDecayIters: 2000,
      dropout: 0,
      dataDir: data,
      // still the file's
      evalInterval: 250,
      lr: 1e-3,
      warmupIters: 100,
      alwaysSaveCheckpoint: false,
    };
    for (const [key, value] of Object.entries(fromFlags)) {
      assert.equal(headline[key as keyof TrainConfig], value, key);
    }
    // --out-dir over the file's out_dir, --snapshot over both; the file over the job's defaults.
    const out = parsed(["--config", file, "--out-dir", join(dir, "o")]);
    assert.equal(out.snapshot, join(dir, "o", "snapshot.safetensors"));
    const snap = parsed(["--config", file, "--out-dir", "o", "--snapshot", join(dir, "s.st")]);
    assert.equal(snap.snapshot, join(dir, "s.st"));
    const fsdp = parsed(["--config", file, "--strategy", "fsdp"]);
    assert.equal(fsdp.snapshot, resolve("out-shakespeare-char", "snapshot"));
    const bools = parsed(["--config", file, "--always-save-checkpoint", "True", "--bias", "1"]);
    assert.deepEqual([bools.alwaysSaveCheckpoint, bools.bias], [true, true]);
  });
});

Deno.test("--dataset tokens takes nanoGPT's defaults and the JSON config file still works", async () => {
  const config = parsed(["--dataset", "tokens", "--data-dir", "d"]);
  assert.equal(config.snapshot, resolve("out", "snapshot.safetensors"));
  assert.deepEqual(
    [config.maxIters, config.evalInterval, config.evalIters, config.warmupIters, config.minLr],
    [600000, 2000, 200, 2000, 6e-5],
  );
  assert.deepEqual([config.lr, config.beta2, config.seed, config.alwaysSaveCheckpoint], [
    6e-4,
    0.95,
    1337,
    true,
  ]);
  await withTempDir("dtrain_nanogpt_json_", async (dir) => {
    const file = join(dir, "job.json");
    await Deno.writeTextFile(
      file,
      JSON.stringify({ dataset: "tokens", dataDir: "x", maxIters: 7 }),
    );
    const fromJson = parsed(["--config", file, "--eval-iters", "3"]);
    assert.deepEqual([fromJson.dataDir, fromJson.maxIters, fromJson.evalIters], [
      resolve("x"),
      7,
      3,
    ]);
  });
});

Deno.test("a nanoGPT config reads literals only and names the line of anything else", () => {
  const read = parseNanoGptConfig(
    [
      'out_dir = "a # b" # not a comment inside the string',
      "min_lr = 6e-5",
      "max_iters = 5_000",
      "decay_lr = True",
      "dropout = 0",
      "device = 'cuda:1'",
      "compile = False",
    ].join("\n"),
    "c.py",
  );
  assert.deepEqual(read.fields, {
    outDir: "a # b",
    minLr: 6e-5,
    maxIters: 5000,
    decayLr: true,
    dropout: 0,
    device: "cuda",
  });
  assert.equal(read.notes.length, 2);
  const refused: [string, RegExp][] = [
    ["n_layer = 6\n\nlearning_rat = 1e-3", /^c\.py:3: unknown nanoGPT config key "learning_rat"/],
    ["gradient_accumulation_steps = 5 * 8", /^c\.py:1: "5 \* 8" is not a literal/],
    ["import time", /^c\.py:1: expected `key = literal`.*: import time$/],
    ["n_layer = 'six'", /^c\.py:1: n_layer must be an int, got str "six"/],
    ["n_layer = 6.0", /^c\.py:1: n_layer must be an int, got float 6/],
    ["bias = 1", /^c\.py:1: bias must be a bool, got int 1/],
    ["out_dir = 'open", /^c\.py:1: the string is not closed on its line/],
    ["max_iters = 10 20", /^c\.py:1: "10 20" is not a literal/],
    ["out_dir = 'a' + 'b'", /^c\.py:1: unexpected "\+ 'b'" after the value/],
    ["if True:\n    n_layer = 2", /^c\.py:1: expected `key = literal`/],
  ];
  for (const [text, message] of refused) {
    assertThrowsMessage(() => parseNanoGptConfig(text, "c.py"), message);
  }
});

Deno.test("the job refuses what its kind of training would ignore, and nanoGPT's impossible settings", async () => {
  await withTempDir("dtrain_nanogpt_bad_", async (dir) => {
    const file = join(dir, "bad.py");
    await Deno.writeTextFile(file, "# a comment\nbatch_size = 4\nwarmup = 3\n");
    assert.throws(
      () => parseTrainArgs(["--config", file]),
      (e: Error) => e.message.startsWith(`config: ${file}:3: unknown nanoGPT config key "warmup"`),
    );
  });
  const tokens = ["--dataset", "tokens", "--data-dir", "d"];
  const refused: [string[], RegExp][] = [
    [[...tokens, "--epochs", "2"], /^--epochs: is for epoch-based training/],
    [["--model", "gpt", "--max-iters", "5"], /^--max-iters: is for iteration-based training/],
    [["--dataset", "tokens"], /^--data-dir: --dataset tokens needs --data-dir DIR/],
    [
      [...tokens, "--nproc-per-node", "2", "--gradient-accumulation-steps", "3"],
      /^--gradient-accumulation-steps: must be a multiple of the world size \(2 processes\)/,
    ],
    [
      [...tokens, "--warmup-iters", "10", "--lr-decay-iters", "10"],
      /^--lr-decay-iters: must exceed --warmup-iters \(10\)/,
    ],
    [[...tokens, "--bias", "yes"], /^--bias: expected true or false/],
    [[...tokens, "--model", "mlp"], /^--model: --dataset tokens needs --model gpt/],
  ];
  for (const [args, message] of refused) assertThrowsMessage(() => parseTrainArgs(args), message);
});

Deno.test("the learning rate is nanoGPT's get_lr", () => {
  const s = { lr: 1e-3, warmupIters: 100, lrDecayIters: 5000, minLr: 1e-4 };
  assert.equal(getLr(0, s), 1e-3 * 1 / 101);
  assert.equal(getLr(99, s), 1e-3 * 100 / 101);
  assert.equal(getLr(100, s), 1e-3);
  const mid = 100 + (5000 - 100) / 2;
  assert.ok(Math.abs(getLr(mid, s) - (1e-4 + 0.5 * (1e-3 - 1e-4))) < 1e-15);
  assert.equal(getLr(5000, s), 1e-4);
  assert.equal(getLr(5001, s), 1e-4);
});
