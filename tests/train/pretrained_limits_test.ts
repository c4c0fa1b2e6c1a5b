// `train --init-from DIR` on hostile GPT-2 folders: a config.json whose sizes its weights do not
// have (n_layer 1e9 once printed "Initializing from GPT-2 weights" and grew memory at 90 MB/s),
// or weights too large for the machine, exit 2 naming the file, the key and the value, before
// any worker starts or anything is allocated.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir as withTempDirAsync } from "../_harness/processes.ts";
import { withTempDir } from "../checkpoint/_temp_dir.ts";
import { parseTrainArgs } from "../../src/train/config.ts";
import { copyWithConfig, gpt2Shapes, HF_DIR, writeSparseSafetensors } from "../nn/_gpt2_folders.ts";
import { writeCharData } from "./_tokens.ts";
import { train } from "./_train.ts";

/** The tokens job's flags but --init-from, with its data in `dir`. */
const job = (dir: string) => ["--dataset", "tokens", "--data-dir", join(dir, "data")];

Deno.test("train --init-from exits 2 at once on a config.json the weights contradict, naming file, key and value", async () => {
  await withTempDirAsync("dtrain_init_hostile_", async (dir) => {
    await writeCharData(join(dir, "data"));
    const gpt2 = copyWithConfig(join(dir, "gpt2"), { n_layer: 1e9 });
    const start = performance.now();
    const run = await train([...job(dir), "--init-from", gpt2, "--out-dir", join(dir, "out")], {
      timeoutMs: 60_000,
    });
    const seconds = (performance.now() - start) / 1000;
    assert.equal(run.code, 2, run.stderr);
    assert.equal(
      run.stderr.trim().split("\n")[0],
      `train: --init-from: ${gpt2}/config.json: n_layer is 1000000000, but model.safetensors has ` +
        "tensors of 2 blocks (h.0 to h.1); the two files disagree",
    );
    assert.doesNotMatch(run.stdout, /Initializing from GPT-2 weights/);
    assert.ok(seconds < 30, `exited after ${seconds.toFixed(1)} s`);
  });
});

Deno.test(
  "train --init-from counts the folder's model, not the flags', against the machine's memory",
  withTempDir((dir) => {
    // One block wide enough that its weights, gradients and AdamW state need twice the memory
    // this machine has; the file is as large as that model (BF16), sparse, so config.json and
    // the header agree and only the memory estimate can refuse it.
    const total = Deno.systemMemoryInfo().total;
    const width = 64 * Math.ceil(Math.sqrt((2 * total) / 16 / 12) / 64);
    const gpt2 = join(dir, "gpt2");
    Deno.mkdirSync(gpt2);
    const config = JSON.parse(Deno.readTextFileSync(join(HF_DIR, "config.json")));
    const sizes = { n_layer: 1, n_embd: width, n_head: 1, n_positions: 16, vocab_size: 101 };
    Deno.writeTextFileSync(join(gpt2, "config.json"), JSON.stringify({ ...config, ...sizes }));
    writeSparseSafetensors(join(gpt2, "model.safetensors"), gpt2Shapes(1, width, 101, 16));
    assert.throws(
      () => parseTrainArgs([...job(dir), "--init-from", gpt2, "--nproc-per-node", "1"]),
      (e: Error) => {
        assert.match(
          e.message,
          new RegExp(
            `^--init-from: ${gpt2}/config\\.json's n_layer 1, n_embd ${width}, n_positions 16 and ` +
              "vocab_size 101 gives the gpt [0-9.e+]+ parameters: with their gradients and adamw " +
              "state about .* on this machine \\(1 process\\(es\\) holding the whole model\\), " +
              "more than its .* of memory$",
          ),
        );
        return true;
      },
    );
    // The flags' model (4 layers, 64 wide) is not what is counted: the fixture passes.
    const fixture = parseTrainArgs([...job(dir), "--init-from", HF_DIR]);
    assert.ok(fixture !== "help" && fixture.initFrom === HF_DIR);
  }),
);
