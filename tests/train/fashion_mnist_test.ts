// One real epoch of the default MLP on Fashion-MNIST, in one process: the job learns.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { FASHION_MNIST_ROOT } from "../../src/data/mod.ts";
import { withTempDir } from "../_harness/processes.ts";
import { assertSucceeded, train } from "./_train.ts";

const FILES = [
  "train-images-idx3-ubyte.gz",
  "train-labels-idx1-ubyte.gz",
  "t10k-images-idx3-ubyte.gz",
  "t10k-labels-idx1-ubyte.gz",
];
const missing = FILES.filter((f) => !existsSync(join(FASHION_MNIST_ROOT, f)));
const skipNote = missing.length
  ? ` (ignored: ${
    missing.join(", ")
  } not in ${FASHION_MNIST_ROOT}; apt-get install dataset-fashion-mnist)`
  : "";

Deno.test({
  name: `train reaches 80% test accuracy on Fashion-MNIST in one epoch${skipNote}`,
  ignore: missing.length > 0,
  fn: async () => {
    await withTempDir("dtrain_fmnist_", async (dir) => {
      const run = await train([
        "--nproc-per-node",
        "1",
        "--epochs",
        "1",
        "--snapshot",
        join(dir, "snap.safetensors"),
      ], { timeoutMs: 60_000 });
      assertSucceeded(run);
      const match = run.stdout.match(/^done: 1 epochs, loss [\d.]+, test accuracy ([\d.]+)%$/m);
      assert.ok(match, run.stdout);
      assert.ok(Number(match[1]) >= 80, `test accuracy ${match[1]}% < 80%`);
    });
  },
});
