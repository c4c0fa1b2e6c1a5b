// GPT.fromPretrained on hostile Hugging Face folders: a config.json whose sizes disagree with the
// weights (n_layer 1e9 once grew memory at 90 MB/s; a huge n_embd, vocab_size or n_positions ran
// out of memory naming nothing) is refused from the safetensors header, before any allocation,
// naming the file, the key and the value; so are tensors whose header shapes disagree, and paths
// that are directories or FIFOs instead of files.
import assert from "node:assert/strict";
import { join } from "node:path";
import { nn } from "../../mod.ts";
import { withTempDir as withTempDirAsync } from "../_harness/processes.ts";
import { withTempDir } from "../checkpoint/_temp_dir.ts";
import { copyWithConfig, gpt2Shapes, HF_DIR, writeSparseSafetensors } from "./_gpt2_folders.ts";

/** Fails unless fromPretrained(dir) throws at once (before allocating) with `message`. */
function refusedAtOnce(dir: string, message: RegExp): void {
  const rss = Deno.memoryUsage().rss, start = performance.now();
  assert.throws(() => nn.GPT.fromPretrained(dir), (e: Error) => {
    assert.match(e.message, message);
    return true;
  });
  const ms = performance.now() - start, grewMb = (Deno.memoryUsage().rss - rss) / 2 ** 20;
  assert.ok(ms < 2000, `refused after ${ms.toFixed(0)} ms`);
  assert.ok(grewMb < 64, `memory grew by ${grewMb.toFixed(0)} MiB before the refusal`);
}

Deno.test(
  "fromPretrained refuses config.json sizes the weights do not have, naming file, key and value",
  withTempDir((dir) => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { n_layer: 1e9 },
        /config\.json: n_layer is 1000000000, but model\.safetensors has tensors of 2 blocks \(h\.0 to h\.1\)/,
      ],
      [
        { n_embd: 2 ** 30, n_head: 2 },
        /config\.json: n_embd is 1073741824, but model\.safetensors has wte\.weight \[101, 32\] \(\[vocab_size, n_embd\]\)/,
      ],
      [
        { vocab_size: 1e12 },
        /config\.json: vocab_size is 1000000000000, but model\.safetensors has wte\.weight \[101, 32\]/,
      ],
      [
        { n_positions: 1e9 },
        /config\.json: n_positions is 1000000000, but model\.safetensors has wpe\.weight \[16, 32\]/,
      ],
      [{ n_layer: 0 }, /config\.json: n_layer is 0, expected a positive integer/],
      [{ n_layer: 2.5 }, /config\.json: n_layer is 2\.5, expected a positive integer/],
      [{ n_layer: "\u001b[2J" }, /config\.json: n_layer is "\\u001b\[2J", expected a positive/],
    ];
    for (const [i, [config, message]] of cases.entries()) {
      refusedAtOnce(copyWithConfig(join(dir, `case${i}`), config), message);
    }
    // JSON reads 1e400 as Infinity, which JSON.stringify would print as null.
    const text = JSON.stringify({ n_layer: 2 }).replace("2", "1e400");
    refusedAtOnce(
      copyWithConfig(join(dir, "huge"), text),
      /config\.json: n_layer is 1e400, expected a positive integer/,
    );
  }),
);

Deno.test(
  "fromPretrained refuses a header whose tensor shapes disagree with config.json before reading any data",
  withTempDir((dir) => {
    // Every tensor as config.json says, but one block's MLP 2^30 wide: 64 GiB of BF16 on the
    // disk (sparse), which the model would be built for and the file read into.
    const shapes = gpt2Shapes(2, 32, 101, 16);
    shapes["h.1.mlp.c_fc.weight"] = [32, 2 ** 30];
    Deno.copyFileSync(join(HF_DIR, "config.json"), join(dir, "config.json"));
    const size = writeSparseSafetensors(join(dir, "model.safetensors"), shapes);
    assert.ok(size > 64 * 2 ** 30);
    refusedAtOnce(
      dir,
      /model\.safetensors: tensor "h\.1\.mlp\.c_fc\.weight" has shape \[32, 1073741824\], expected \[32, 128\] \(Conv1D/,
    );
  }),
);

Deno.test("fromPretrained names a config.json or model.safetensors that is a directory or a FIFO", async () => {
  await withTempDirAsync("dtrain_gpt2_kinds_", async (dir) => {
    const configDir = join(dir, "config_dir");
    Deno.mkdirSync(join(configDir, "config.json"), { recursive: true });
    refusedAtOnce(configDir, /config_dir\/config\.json: is a directory, expected a file/);

    const weightsDir = copyWithConfig(join(dir, "weights_dir"), {});
    Deno.removeSync(join(weightsDir, "model.safetensors"));
    Deno.mkdirSync(join(weightsDir, "model.safetensors"));
    refusedAtOnce(
      weightsDir,
      /weights_dir\/model\.safetensors: is a directory, expected a safetensors file/,
    );

    // Opening a FIFO for reading would wait for a writer forever.
    const fifo = copyWithConfig(join(dir, "fifo"), {});
    Deno.removeSync(join(fifo, "model.safetensors"));
    const made = await new Deno.Command("mkfifo", { args: [join(fifo, "model.safetensors")] })
      .output();
    assert.ok(made.success);
    refusedAtOnce(fifo, /fifo\/model\.safetensors: is a FIFO, expected a safetensors file/);
  });
});

Deno.test(
  "fromPretrained echoes a model.safetensors header that is not JSON escaped, never raw",
  withTempDir((dir) => {
    const gpt2 = copyWithConfig(join(dir, "gpt2"), {});
    const header = new TextEncoder().encode("\u001b[2J\u001b]0;pwned\u0007");
    const bytes = new Uint8Array(8 + header.length);
    new DataView(bytes.buffer).setBigUint64(0, BigInt(header.length), true);
    bytes.set(header, 8);
    Deno.writeFileSync(join(gpt2, "model.safetensors"), bytes);
    refusedAtOnce(
      gpt2,
      /model\.safetensors: header \(14 bytes\) is not valid JSON: Unexpected token '\\u001b', "\\u001b\[2J\\u001b\]0;pwned\\u0007" is not valid JSON$/,
    );
  }),
);
