// run: deno task launch --nproc-per-node 2 docs/guide/examples/09_tp_gpt.ts
// expect: [rank 0] tensor parallel over 2 ranks: this rank holds 14,496 of 28,032 parameters
// expect-match: \[rank 1\] loss 4\.\d+ on both ranks, the unsplit GPT's loss \d\.\d+: relative error \d\.\de[-+]\d+
// expect: [rank 0] every gradient equals its slice of the unsplit GPT's (worst relative error
// expect: [rank 1] after one AdamW step the losses still agree
import assert from "node:assert/strict";
import { cat, dist, manualSeed, nn, optim, parallel, type Tensor, tensor } from "../../../mod.ts";

await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank(), tp = dist.getWorldSize();
const mesh = await dist.initDeviceMesh("cpu", [tp], { meshDimNames: ["tp"] });
const config = { vocabSize: 64, blockSize: 16, nLayer: 2, nHead: 4, nEmbd: 32, dropout: 0 };
const build = () => (manualSeed(0), new nn.GPT(config)); // the same weights on every rank

const whole = build(), split = build();
// torchtitan's plan on nanoGPT's names: c_attn by heads and c_fc column-wise, both c_proj
// row-wise, the tied wte/lm_head on the vocabulary, the norms on each rank's part of the
// sequence, and the loss computed from the vocabulary shards without gathering the logits.
parallel.parallelizeGPT(split, mesh, { sequenceParallel: true, lossParallel: true });
const count = (m: nn.Module) => m.parameters().reduce((s, p) => s + p.numel(), 0);
const fmt = (x: number) => x.toLocaleString("en-US");
if (rank === 0) {
  console.log(
    `tensor parallel over ${tp} ranks: this rank holds ${fmt(count(split))} of ` +
      `${fmt(count(whole))} parameters`,
  );
}

// Both ranks of a TP group read the same batch: together they are one model replica.
const tokens = Array.from({ length: 4 * 17 }, (_, i) => (i * 7 + 3) % 64);
const x = tensor(tokens.filter((_, i) => i % 17 !== 16), [4, 16], { dtype: "i32" });
const y = tensor(tokens.filter((_, i) => i % 17 !== 0), [4, 16], { dtype: "i32" });
const relative = (a: number, b: number) => Math.abs(a - b) / Math.abs(b);

const wholeLoss = whole.forward(x, y).loss!, splitLoss = split.forward(x, y).loss!;
wholeLoss.backward();
splitLoss.backward();
const [l1, l2] = [splitLoss.item(), wholeLoss.item()];
assert.ok(relative(l1, l2) < 1e-5);
if (rank === 1) {
  console.log(
    `loss ${l1.toFixed(4)} on both ranks, the unsplit GPT's loss ${l2.toFixed(4)}: ` +
      `relative error ${relative(l1, l2).toExponential(1)}`,
  );
}

/** This rank's part of a full tensor placed as `p` is: part `rank` of each of its chunks. */
function sliceOf(full: Tensor, p: Tensor): Tensor {
  const placed = parallel.tensorParallelPlacement(p);
  if (!(placed?.placement instanceof parallel.Shard)) return full;
  const dim = (placed.placement.dim + full.ndim) % full.ndim;
  const chunk = full.shape[dim] / placed.chunks, part = chunk / tp;
  const pieces = Array.from(
    { length: placed.chunks },
    (_, c) => full.narrow(dim, c * chunk + rank * part, part),
  );
  return cat(pieces, dim);
}
const wholeParams = new Map(whole.namedParameters());
const norm = (t: Tensor) => t.pow(2).sum().sqrt().item();
let worst = 0;
for (const [name, p] of split.namedParameters()) {
  let [got, want] = [p.grad!, sliceOf(wholeParams.get(name)!.grad!, p)];
  if (name.endsWith("c_attn.bias")) {
    // The key third of c_attn's bias has a zero true gradient (softmax ignores a shift shared by
    // every key): its relative error is float noise over noise, so compare q and v only.
    const third = got.shape[0] / 3;
    [got, want] = [got, want].map((g) =>
      cat([g.narrow(0, 0, third), g.narrow(0, 2 * third, third)])
    );
  }
  worst = Math.max(worst, norm(got.sub(want)) / norm(want));
}
assert.ok(worst < 1e-5, `worst relative gradient error ${worst}`);
console.log(
  `every gradient equals its slice of the unsplit GPT's (worst relative error ` +
    `${worst.toExponential(1)})`,
);

for (const model of [whole, split]) {
  new optim.AdamW(model.parameters(), { lr: 1e-3 }).step();
}
const after = [split.forward(x, y).loss!.item(), whole.forward(x, y).loss!.item()];
assert.ok(relative(after[0], after[1]) < 1e-5);
console.log("after one AdamW step the losses still agree");
await dist.destroyProcessGroup();
