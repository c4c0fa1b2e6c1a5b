// run: deno task launch --nproc-per-node 2 docs/guide/examples/09_megatron_mlp.ts
// expect: [rank 0] rank 0 holds A[:, 0:32] and B[0:32, :]: 1,024 of 2,048 weights
// expect: [rank 1] Y = sum over ranks of gelu(X A_r) B_r equals the unsplit MLP's Y
// expect: [rank 1] A_r's and B_r's gradients are their slices of the unsplit MLP's
// expect: [rank 0] X's gradient, summed over ranks in backward, equals the unsplit MLP's
import assert from "node:assert/strict";
import { dist, F, manualSeed, parallel, randn, type Tensor } from "../../../mod.ts";

await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank(), tp = dist.getWorldSize();
const group = (await dist.initDeviceMesh("cpu", [tp], { meshDimNames: ["tp"] })).getGroup();

// Every rank draws the same X, weights and output weighting (the same seed), so each can check
// its result against the whole MLP computed locally.
manualSeed(0);
const [n, d, h] = [4, 16, 64];
const X = randn([n, d]), A = randn([d, h], { std: 0.25 }), B = randn([h, d], { std: 0.25 });
const W = randn([n, d]); // the loss is sum(Y · W), so that Y's gradient is W
const leaf = (t: Tensor) => {
  const x = t.contiguous().detach();
  x.requiresGrad = true;
  return x;
};

// The unsplit MLP: Y = gelu(X A) B.
const [Xf, Af, Bf] = [X, A, B].map(leaf);
const Yf = F.gelu(Xf.matmul(Af)).matmul(Bf);
Yf.mul(W).sum().backward();

// Megatron's split: A by columns, B by rows, so that gelu applies to each rank's own columns and
// the only communication in forward is one all-reduce of Y (and in backward one of X's gradient).
const part = h / tp, cols = [rank * part, part] as const;
const [Xr, Ar, Br] = [X, A.narrow(1, ...cols), B.narrow(0, ...cols)].map(leaf);
const held = Ar.numel() + Br.numel(), all = A.numel() + B.numel();
console.log(
  `rank ${rank} holds A[:, ${cols[0]}:${cols[0] + part}] and B[${cols[0]}:${cols[0] + part}, :]: ` +
    `${held.toLocaleString("en-US")} of ${all.toLocaleString("en-US")} weights`,
);
// f: identity forward, all-reduce backward (each rank's X gradient is partial); g: the reverse.
const Y = parallel.allReduceIdentity(
  F.gelu(parallel.identityAllReduce(Xr, group).matmul(Ar)).matmul(Br),
  group,
);
Y.mul(W).sum().backward();

const maxDiff = (a: Tensor, b: Tensor) => a.sub(b).abs().max().item();
assert.ok(maxDiff(Y, Yf) < 1e-5);
console.log("Y = sum over ranks of gelu(X A_r) B_r equals the unsplit MLP's Y");
assert.ok(maxDiff(Ar.grad!, Af.grad!.narrow(1, ...cols)) < 1e-5);
assert.ok(maxDiff(Br.grad!, Bf.grad!.narrow(0, ...cols)) < 1e-5);
console.log("A_r's and B_r's gradients are their slices of the unsplit MLP's");
assert.ok(maxDiff(Xr.grad!, Xf.grad!) < 1e-5);
console.log("X's gradient, summed over ranks in backward, equals the unsplit MLP's");
await dist.destroyProcessGroup();
