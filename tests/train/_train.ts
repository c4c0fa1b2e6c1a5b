/**
 * Running the train job for the train tests: directly (`src/train/main.ts`, which starts the
 * launcher itself when asked for several processes), or under the launcher with the
 * fault-injecting entry point of workers/train.ts; and reading what it saved.
 * @module
 */

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { load } from "../../src/checkpoint/mod.ts";
import { relativeError } from "../_harness/close.ts";
import { freePort } from "../_harness/ranks.ts";
import { describe, ROOT, runDeno, type RunOptions, type RunResult } from "../_harness/processes.ts";

/** The job with the fault-injection hooks of workers/train.ts. */
export const HOOKED_MAIN = fileURLToPath(new URL("./workers/train.ts", import.meta.url));

/** A small, fast job: the MLP on 2048 synthetic samples, 16 batches of 128 per epoch. */
export const SMALL_JOB = [
  "--dataset",
  "synthetic",
  "--model",
  "mlp",
  "--hidden",
  "16",
  "--batch-size",
  "128",
  "--lr",
  "0.05",
  "--seed",
  "3",
  "--threads",
  "1",
];

/** A folder holding the first 24 KiB of Debian's fortunes, for epochs of a few dozen steps. */
export async function smallCorpus(dir: string): Promise<string> {
  const root = join(dir, "corpus");
  await Deno.mkdir(root);
  const text = await Deno.readFile("/usr/share/games/fortunes/fortunes");
  await Deno.writeFile(join(root, "fortunes"), text.subarray(0, 24 * 1024));
  return root;
}

/** Runs `deno run src/train/main.ts ARGS`. */
export function train(args: string[], options: Partial<RunOptions> = {}): Promise<RunResult> {
  return runDeno({ timeoutMs: 60_000, ...options, args: [`${ROOT}src/train/main.ts`, ...args] });
}

/** Runs the launcher with `launcherFlags` (and a free port) over the hooked job with `args`. */
export function launchHooked(
  launcherFlags: string[],
  args: string[],
  options: Partial<RunOptions> = {},
): Promise<RunResult> {
  return runDeno({
    timeoutMs: 60_000,
    ...options,
    args: [
      `${ROOT}src/launch/main.ts`,
      "--master-port",
      String(freePort()),
      ...launcherFlags,
      HOOKED_MAIN,
      ...args,
    ],
  });
}

/** Fails unless the run exited 0 and left no process behind. */
export function assertSucceeded(run: RunResult): void {
  assert.equal(run.code, 0, `exit ${run.code} (${run.signal}):\n${run.stderr}\n${run.stdout}`);
  assert.deepEqual(run.leftovers, [], `left behind: ${describe(run.leftovers)}`);
}

/** What a safetensors file holds: every tensor's values by name, and the metadata. */
export interface Saved {
  tensors: Record<string, Float32Array | Int32Array>;
  shapes: Record<string, readonly number[]>;
  metadata: Record<string, string>;
}

/** Reads a safetensors file with `src/checkpoint`. */
export function readSaved(path: string): Saved {
  const { tensors, metadata } = load(path);
  const saved: Saved = { tensors: {}, shapes: {}, metadata };
  for (const [name, t] of Object.entries(tensors)) {
    // Checkpoints hold f32 and i32 tensors only (bool is refused on save).
    saved.tensors[name] = t.toArray() as Float32Array | Int32Array;
    saved.shapes[name] = t.shape;
    t.dispose();
  }
  return saved;
}

/**
 * Reads a run's model.safetensors as a state dict: the tied `lm_head.weight`, which the file
 * holds once (as `transformer.wte.weight`), back beside it.
 */
export function readModelFile(path: string): Saved {
  const saved = readSaved(path);
  const embedding = "transformer.wte.weight", head = "lm_head.weight";
  assert.equal(saved.shapes[head], undefined, `${path} stores the tied ${head} once`);
  if (saved.tensors[embedding] !== undefined) {
    saved.tensors[head] = saved.tensors[embedding];
    saved.shapes[head] = saved.shapes[embedding];
  }
  return saved;
}

/** The `model.*` tensors of a snapshot, without the prefix. */
export function modelWeights(saved: Saved): Record<string, Float32Array | Int32Array> {
  return Object.fromEntries(
    Object.entries(saved.tensors).filter(([name]) => name.startsWith("model.")).map((
      [name, values],
    ) => [name.slice("model.".length), values]),
  );
}

/** The snapshot's progress metadata. */
export function snapshotInfo(saved: Saved): { epochsRun: number } {
  return JSON.parse(saved.metadata.dtrain);
}

/** Fails unless both hold the same names and bit-identical values. */
export function assertBitIdentical(
  actual: Record<string, Float32Array | Int32Array>,
  expected: Record<string, Float32Array | Int32Array>,
  what: string,
): void {
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${what}: names`);
  for (const [name, want] of Object.entries(expected)) {
    assert.equal(actual[name].length, want.length, `${what}: ${name}: length`);
    const got = new Uint32Array(actual[name].buffer, actual[name].byteOffset, want.length);
    const bits = new Uint32Array(want.buffer, want.byteOffset, want.length);
    const i = got.findIndex((b, k) => b !== bits[k]);
    assert.ok(i < 0, `${what}: ${name}[${i}] is ${actual[name][i]}, expected ${want[i]}`);
  }
}

/** A run's saved tensors by name. */
type Weights = Record<string, Float32Array | Int32Array>;

/** Fails unless every tensor of `actual` is within `tolerance` (relative, L2) of `expected`'s. */
export function assertClose(
  actual: Weights,
  expected: Weights,
  what: string,
  tolerance = 1e-5,
): void {
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${what}: names`);
  for (const [name, want] of Object.entries(expected)) {
    const error = relativeError(actual[name], want, `${what}: ${name}: length`);
    assert.ok(error <= tolerance, `${what}: ${name} has relative error ${error}`);
  }
}
