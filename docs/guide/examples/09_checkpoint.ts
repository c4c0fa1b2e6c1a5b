// run: deno run -A --v8-flags=--expose-gc docs/guide/examples/09_checkpoint.ts
// expect-match: none +holds [\d.]+ MiB of activations for backward
// expect-match: full +holds [\d.]+ MiB of activations for backward \(0\.\d+× of none\)
// expect: the gradients of none, selective and full are equal bit for bit
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import { allocatedBytes, manualSeed, nn, parallel, tensor, tidy } from "../../../mod.ts";

const args = parseArgs({
  args: Deno.args,
  options: { "block-size": { type: "string", default: "64" }, json: { type: "boolean" } },
}).values;
const blockSize = Number(args["block-size"]);
const config = { vocabSize: 64, blockSize, nLayer: 4, nHead: 4, nEmbd: 64, dropout: 0.1 };
const gc = (globalThis as { gc?: () => void }).gc!; // --expose-gc: count only live tensors

const batch = 4, tokens = Array.from({ length: batch * (blockSize + 1) }, (_, i) => (i * 7) % 64);
const x = tensor(tokens.filter((_, i) => i % (blockSize + 1) !== blockSize), [batch, blockSize], {
  dtype: "i32",
});
const y = tensor(tokens.filter((_, i) => i % (blockSize + 1) !== 0), [batch, blockSize], {
  dtype: "i32",
});

/** What one forward leaves allocated for backward, and the gradients backward then computes. */
function measure(mode: "none" | "selective" | "full") {
  manualSeed(0); // the same weights and the same dropout masks in every mode
  const model = new nn.GPT(config);
  // Full: every block keeps only its input and recomputes its forward in backward (with dropout's
  // random state replayed); selective: every second block does.
  if (mode !== "none") {
    parallel.applyActivationCheckpointing(model, mode === "full" ? { mode } : { mode, every: 2 });
  }
  return tidy(() => {
    gc();
    const before = allocatedBytes();
    const { loss } = model.forward(x, y);
    gc();
    const held = allocatedBytes() - before;
    loss!.backward();
    return { mode, held, grads: model.parameters().map((p) => p.grad!.toArray()) };
  });
}

const runs = (["none", "selective", "full"] as const).map(measure);
const MiB = 2 ** 20;
for (const r of runs) {
  const share = r.mode === "none" ? "" : ` (${(r.held / runs[0].held).toFixed(2)}× of none)`;
  if (!args.json) {
    console.log(
      `${r.mode.padEnd(9)} holds ${
        (r.held / MiB).toFixed(2)
      } MiB of activations for backward${share}`,
    );
  }
}
assert.ok(runs[2].held < 0.5 * runs[0].held);
for (const r of runs.slice(1)) {
  r.grads.forEach((g, i) => assert.deepEqual(g, runs[0].grads[i], `${r.mode}: gradient ${i}`));
}
if (args.json) {
  console.log(JSON.stringify({ config, runs: runs.map(({ mode, held }) => ({ mode, held })) }));
} else console.log("the gradients of none, selective and full are equal bit for bit");
