/**
 * `deno task sample` (nanoGPT's sample.py) on a char-level GPT the train job trained for a few
 * iterations: repeatable with --seed, the sizes asked for, top-k 1 as greedy argmax, FILE:
 * prompts and relative paths from the user's folder, and bad flags refused naming the flag.
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { noGrad } from "../../src/tensor/autograd.ts";
import { tensor } from "../../src/tensor/creation.ts";
import { loadModelFile } from "../../src/train/model_file.ts";
import { ROOT, runDeno, type RunResult } from "../_harness/processes.ts";
import { writeCharData } from "./_tokens.ts";
import { assertSucceeded, readSaved, smallCorpus, train } from "./_train.ts";

const SEPARATOR = "---------------";
const SHAPE = ["--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size", "16"];

/** A folder with data/ (char-level) and out/, where the train job left a 20-iteration GPT. */
async function trainedRun(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "dtrain_sample_" });
  await writeCharData(join(dir, "data"));
  const run = await train([
    ...["--dataset", "tokens", "--model", "gpt", "--data-dir", join(dir, "data")],
    ...["--out-dir", join(dir, "out"), "--max-iters", "20", "--eval-interval", "10"],
    ...["--eval-iters", "2", "--batch-size", "4", "--threads", "1", "--lr", "0.01", ...SHAPE],
  ]);
  assertSucceeded(run);
  return dir;
}

const dir = await trainedRun();
const modelFile = join(dir, "out", "model.safetensors");

/** `deno task sample ARGS`, run from `cwd` (the temp folder unless given). */
function sample(args: string[], cwd = dir): Promise<RunResult> {
  return runDeno({
    task: true,
    args: ["--config", join(ROOT, "deno.json"), "sample", ...args],
    cwd,
    timeoutMs: 60_000,
  });
}

/** The samples a run printed: the text before each separator line. */
function samples(stdout: string): string[] {
  const parts = stdout.split(`\n${SEPARATOR}\n`);
  assert.equal(parts.at(-1), "", `ends with the separator: ${JSON.stringify(stdout)}`);
  return parts.slice(0, -1);
}

/** The model's greedy continuation of `prompt` (argmax at every step), decoded with `itos`. */
function greedy(prompt: string, steps: number, itos: string[]): string {
  const { model } = loadModelFile(modelFile);
  model.eval();
  const ids = [...prompt].map((c) => itos.indexOf(c));
  noGrad(() => {
    for (let s = 0; s < steps; s++) {
      const context = ids.slice(-model.config.blockSize);
      const x = tensor(Int32Array.from(context), [1, context.length], { dtype: "i32" });
      const logits = Array.from(model.forward(x).logits.toArray());
      ids.push(logits.indexOf(Math.max(...logits)));
      x.dispose();
    }
  });
  return ids.map((i) => itos[i]).join("");
}

Deno.test("sample: --num-samples samples of the prompt and --max-new-tokens characters, the same for the same --seed", async () => {
  const args = ["--init-from", "out", "--start", "the ", "--max-new-tokens", "30"];
  const first = await sample([...args, "--num-samples", "3", "--seed", "7"]);
  assertSucceeded(first);
  const drawn = samples(first.stdout);
  assert.equal(drawn.length, 3);
  for (const text of drawn) {
    assert.ok(text.startsWith("the "), text);
    assert.equal([...text].length, 4 + 30, text);
  }
  assert.notEqual(drawn[0], drawn[1], "each sample draws its own tokens");
  const again = await sample([...args, "--num-samples", "3", "--seed", "7"]);
  assert.equal(again.stdout, first.stdout);
  const other = await sample([...args, "--num-samples", "3", "--seed", "8"]);
  assert.notEqual(other.stdout, first.stdout);
  assert.match(first.stderr, /loading meta from .*data\/meta\.json/);
});

Deno.test("sample: --top-k 1 is greedy argmax decoding, at any temperature", async () => {
  const itos = (JSON.parse(await Deno.readTextFile(join(dir, "data", "meta.json")))).itos;
  const want = greedy("a cat", 25, itos);
  for (const temperature of ["0.5", "2"]) {
    const run = await sample([
      ...["--init-from", join(dir, "out"), "--start", "a cat", "--max-new-tokens", "25"],
      ...["--num-samples", "2", "--top-k", "1", "--temperature", temperature],
    ]);
    assertSucceeded(run);
    assert.deepEqual(samples(run.stdout), [want, want], `temperature ${temperature}`);
  }
});

Deno.test("sample: --start FILE:path reads the prompt from a file relative to the user's folder", async () => {
  const sub = join(dir, "sub");
  await Deno.mkdir(sub, { recursive: true });
  await Deno.writeTextFile(join(sub, "prompt.txt"), "the dog ran.\n");
  const run = await sample(
    ["--init-from", "../out", "--start", "FILE:prompt.txt", "--num-samples", "1"],
    sub,
  );
  assertSucceeded(run);
  const [text] = samples(run.stdout);
  assert.ok(text.startsWith("the dog ran.\n"), text);
  assert.equal([...text].length, 13 + 500, "500 new tokens by default, as nanoGPT");
});

Deno.test("sample: --init-from a Hugging Face GPT-2 folder decodes with GPT-2's tokenizer", async () => {
  const hf = join(ROOT, "tests", "fixtures", "gpt2_hf");
  // "!" is GPT-2's token 0: inside the fixture's vocabulary of 101.
  const args = ["--init-from", hf, "--start", "!", "--num-samples", "2", "--max-new-tokens", "8"];
  const run = await sample([...args, "--device", "cpu"]);
  assertSucceeded(run);
  const drawn = samples(run.stdout);
  assert.equal(drawn.length, 2);
  for (const text of drawn) assert.ok(text.startsWith("!") && text.length > 1, text);
  assert.match(run.stderr, /assuming GPT-2 encodings/);
  const outside = await sample([...args.slice(0, 2), "--start", "\n"]);
  assert.equal(outside.code, 2);
  assert.match(outside.stderr, /--start: token \d+ is outside the model's vocabulary of 101/);
});

Deno.test("sample: a --dataset text run's model decodes as the UTF-8 bytes it trained on", async () => {
  const run = await train([
    ...["--model", "gpt", "--data-root", await smallCorpus(dir), "--epochs", "1"],
    ...["--max-steps", "3", "--batch-size", "8", "--threads", "1", ...SHAPE],
    ...["--snapshot", join(dir, "text", "snap.safetensors")],
  ]);
  assertSucceeded(run);
  const drawn = await sample(["--init-from", "text", "--start", "Ünï", "--max-new-tokens", "12"]);
  assertSucceeded(drawn);
  assert.match(drawn.stderr, /decoding tokens as the bytes of UTF-8 text/);
  for (const text of samples(drawn.stdout)) assert.ok(text.startsWith("Ünï"), text);
});

Deno.test("sample: bad flags and missing files are refused with exit 2, naming the flag or the absolute path", async () => {
  const cases: [string[], RegExp][] = [
    [["--bogus", "1"], /--bogus: unknown flag/],
    [["--num-samples", "0"], /--num-samples: expected an integer >= 1, got "0"/],
    [["--max-new-tokens", "ten"], /--max-new-tokens: expected an integer >= 0, got "ten"/],
    [["--top-k", "-1"], /--top-k: expects a value/],
    [["--top-k=-1"], /--top-k: expected an integer >= 0, got "-1"/],
    [["--top-k", "1.5"], /--top-k: expected an integer >= 0, got "1.5"/],
    [["--temperature", "0"], /--temperature: expected a positive number, got "0"/],
    [["--seed"], /--seed: expects a value/],
    [["--device", "tpu"], /--device: expected cpu/],
    [["--start", "xyz"], /--start: /],
    [["--start", "FILE:nope.txt"], new RegExp(`${join(dir, "nope.txt")}: cannot read`)],
    [["--init-from", "missing"], new RegExp(`${join(dir, "missing")}: not found`)],
    [["--init-from", "data"], new RegExp(`${join(dir, "data")}: has neither model.safetensors`)],
    [["--data-dir", "out"], new RegExp(`${join(dir, "out", "meta.json")}: not found`)],
    [["--init-from", "stopped"], /stopped: has neither .*; its snapshot\.safetensors is a run's/],
  ];
  // A run stopped before its end: its snapshot, no model.safetensors.
  await Deno.mkdir(join(dir, "stopped"), { recursive: true });
  const snapshot = join(dir, "out", "snapshot.safetensors");
  await Deno.copyFile(snapshot, join(dir, "stopped", "snapshot.safetensors"));
  for (const [flags, message] of cases) {
    const from = flags[0] === "--init-from" ? [] : ["--init-from", "out"];
    const run = await sample(["--max-new-tokens", "2", ...from, ...flags]);
    assert.equal(run.code, 2, `${flags.join(" ")}: ${run.stdout}${run.stderr}`);
    assert.match(run.stderr, message, flags.join(" "));
  }
});

Deno.test("the train job's model.safetensors stores the tied embedding once, with the GPT's shape", () => {
  const saved = readSaved(modelFile);
  assert.equal(saved.shapes["lm_head.weight"], undefined);
  assert.deepEqual(saved.shapes["transformer.wte.weight"], [16, 16]);
  const floats = Object.values(saved.tensors).reduce((n, t) => n + t.length, 0);
  const { model } = loadModelFile(modelFile);
  assert.equal(floats, model.numParams(false), "every parameter once");
  const header = 8 + 4096;
  assert.ok(Deno.statSync(modelFile).size < floats * 4 + header);
  assert.deepEqual(JSON.parse(saved.metadata.model_args), {
    n_layer: 2,
    n_head: 2,
    n_embd: 16,
    block_size: 16,
    bias: false,
    vocab_size: 16,
    dropout: 0,
  });
});

globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
