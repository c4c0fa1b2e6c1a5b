// A run that diverges stops at the first non-finite loss or gradient norm (exit 1, one line naming
// the step) and never replaces the last good snapshot: its bytes are the same after the run.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { assertSucceeded, SMALL_JOB, train } from "./_train.ts";

/** `--lr-schedule cosine` takes the rate from --lr, not from the snapshot: a resume can diverge. */
const JOB = [...SMALL_JOB, "--lr-schedule", "cosine", "--log-every", "4"];

/** Every file under `path` (or `path` itself) with its SHA-256, for a byte-for-byte comparison. */
async function digests(path: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  const visit = async (p: string) => {
    if ((await Deno.stat(p)).isDirectory) {
      for await (const e of Deno.readDir(p)) await visit(join(p, e.name));
      return;
    }
    const hash = await crypto.subtle.digest("SHA-256", await Deno.readFile(p));
    files[p] = Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
  };
  await visit(path);
  return files;
}

const modes = [
  { name: "one process", flags: ["--nproc-per-node", "1"], snapshot: "snap.safetensors" },
  { name: "DDP over 2 processes", flags: ["--nproc-per-node", "2"], snapshot: "snap.safetensors" },
  {
    name: "FSDP in one process",
    flags: ["--nproc-per-node", "1", "--strategy", "fsdp"],
    snapshot: "snap",
  },
  {
    name: "FSDP over 2 processes",
    flags: ["--nproc-per-node", "2", "--strategy", "fsdp"],
    snapshot: "snap",
  },
];

for (const mode of modes) {
  Deno.test(`train stops a diverging run at its first non-finite loss and keeps the last good snapshot byte for byte (${mode.name})`, async () => {
    await withTempDir("dtrain_diverge_", async (dir) => {
      const snapshot = join(dir, mode.snapshot);
      const flags = [...JOB, ...mode.flags, "--snapshot", snapshot];
      assertSucceeded(await train([...flags, "--epochs", "1"]));
      const before = await digests(snapshot);
      // Epoch 1 ended at step 16 (8 on 2 ranks); the next step runs at a rate of 1e30, the weights
      // blow up, and the step after it has an infinite loss.
      const step = mode.flags[1] === "2" ? 10 : 18;
      const run = await train([...flags, "--lr", "1e30", "--epochs", "3"]);
      assert.equal(run.code, 1, `exit ${run.code}:\n${run.stderr}\n${run.stdout}`);
      assert.deepEqual(run.leftovers, []);
      assert.doesNotMatch(run.stdout, /snapshot saved|done:/);
      const line = new RegExp(
        `train: step ${step}: the loss is not finite( on 2 of 2 ranks)? \\(this rank's loss ` +
          `(Infinity|NaN), gradient norm NaN\\): the run diverged; stopped before the optimizer ` +
          `step, without saving a snapshot$`,
        "m",
      );
      assert.match(run.stderr, line);
      if (mode.flags[1] === "1") {
        assert.equal(run.stderr.trimEnd().split("\n").length, 1, `one line: ${run.stderr}`);
      }
      assert.deepEqual(await digests(snapshot), before, "the last good snapshot is untouched");
    });
  });
}

Deno.test("train does not save a snapshot whose weights the last step made infinite", async () => {
  await withTempDir("dtrain_diverge_save_", async (dir) => {
    const snapshot = join(dir, "snap.safetensors");
    const flags = [...JOB, "--nproc-per-node", "1", "--snapshot", snapshot];
    assertSucceeded(await train([...flags, "--epochs", "1"]));
    const before = await digests(snapshot);
    // Step 17's loss is finite, but its update at a rate beyond f32 makes the weights infinite:
    // --max-steps stops there and would save them.
    const run = await train([...flags, "--lr", "1e40", "--epochs", "3", "--max-steps", "17"]);
    assert.equal(run.code, 1, `exit ${run.code}:\n${run.stderr}`);
    assert.equal(
      run.stderr.trimEnd(),
      `train: step 17: parameter 0.weight holds non-finite values: the run diverged; ` +
        `the snapshot was not written, ${snapshot} stays as it was`,
    );
    assert.deepEqual(await digests(snapshot), before);
  });
});
