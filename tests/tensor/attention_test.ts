// F.scaledDotProductAttention and the slicing views against PyTorch (tests/fixtures/attention.json,
// made by gen_attention.py), plus what the fixtures cannot show: dropout's gradient agrees with
// its own forward, masks broadcast without copies, saved memory does not grow with T², errors.
import assert from "node:assert/strict";
import {
  allocatedBytes,
  F,
  getRngState,
  noGrad,
  randn,
  setRngState,
  type Tensor,
  tensor,
  tidy,
} from "../../mod.ts";
import { assertClose, fromFixture, loadCases, type OpCase } from "../_harness/fixtures.ts";
import { packedCausalAttention } from "../../src/tensor/ops/attention.ts";

function apply(c: OpCase, inputs: Record<string, Tensor>): Tensor {
  const a = c.args as Record<string, unknown>;
  const x = inputs.x;
  switch (c.op) {
    case "scaledDotProductAttention":
      return F.scaledDotProductAttention(inputs.q, inputs.k, inputs.v, {
        attnMask: inputs.mask ?? null,
        isCausal: a.isCausal as boolean,
        scale: a.scale as number | undefined,
      });
    case "narrow":
      return x.narrow(a.dim as number, a.start as number, a.length as number);
    case "select":
      return x.select(a.dim as number, a.index as number);
    case "split":
      return x.split(a.sizes as number[], a.dim as number)[a.piece as number];
    case "chunk":
      return x.chunk(a.chunks as number, a.dim as number)[a.piece as number];
    case "narrowView":
      return x.narrow(a.dim as number, a.start as number, a.length as number)
        .view(a.shape as number[]).transpose(1, 2);
  }
  throw new Error(`unknown op ${c.op}`);
}

for (const c of loadCases("attention.json")) {
  Deno.test(`${c.name} matches PyTorch (values and gradients)`, () => {
    const inputs: Record<string, Tensor> = {};
    for (const [name, t] of Object.entries(c.inputs)) {
      inputs[name] = fromFixture(t, name !== "mask");
    }
    const out = apply(c, inputs);
    assertClose(out, c.outputs.out, `${c.name} output`);
    out.mul(fromFixture(c.gradOutput)).sum().backward();
    for (const [name, expected] of Object.entries(c.grads)) {
      assertClose(inputs[name].grad!, expected, `${c.name} grad of ${name}`, {
        rtol: 1e-4,
        atol: 1e-6,
      });
    }
  });
}

Deno.test("scaledDotProductAttention: dropout's gradient matches finite differences of the same mask", () => {
  // The mask is drawn from the counter RNG at the seed and offset of the call, so rerunning the
  // forward at the same RNG state redraws it: finite differences see the same dropped weights.
  const q = randn([1, 2, 6, 4], { requiresGrad: true });
  const k = randn([1, 2, 6, 4]), v = randn([1, 2, 6, 4]);
  const g = randn([1, 2, 6, 4]);
  const state = getRngState();
  const loss = (x: Tensor) =>
    F.scaledDotProductAttention(x, k, v, { isCausal: true, dropoutP: 0.3 }).mul(g).sum();
  loss(q).backward();
  const analytic = Array.from(q.grad!.toArray());
  const base = Array.from(q.toArray());
  const h = 1e-2;
  for (const i of [0, 5, 13, 30, 47]) {
    const at = (delta: number) =>
      noGrad(() => {
        const shifted = Float32Array.from(base);
        shifted[i] += delta;
        setRngState(state);
        return loss(tensor(shifted, q.shape)).item();
      });
    const numeric = (at(h) - at(-h)) / (2 * h);
    assert.ok(
      Math.abs(numeric - analytic[i]) <= 2e-3 + 2e-2 * Math.abs(numeric),
      `element ${i}: analytic ${analytic[i]}, numeric ${numeric}`,
    );
  }
});

Deno.test("scaledDotProductAttention: dropout zeroes weights, scales the rest, differs per call", () => {
  const q = randn([1, 1, 64, 8]), k = randn([1, 1, 64, 8]);
  const v = tensor(new Float32Array(64 * 8).fill(1), [1, 1, 64, 8]);
  // with v all ones each output is the sum of the row's kept weights / (1 - p): 1 on average
  const a = F.scaledDotProductAttention(q, k, v, { dropoutP: 0.5 }).toArray();
  const b = F.scaledDotProductAttention(q, k, v, { dropoutP: 0.5 }).toArray();
  const mean = Array.from(a).reduce((s, x) => s + x, 0) / a.length;
  assert.ok(Math.abs(mean - 1) < 0.15, `mean output ${mean}, expected about 1`);
  assert.notDeepStrictEqual(Array.from(a), Array.from(b));
});

Deno.test("scaledDotProductAttention: memory kept for backward grows with T, not T²", () => {
  const saved = (t: number) =>
    tidy(() => {
      const q = randn([1, 4, t, 16], { requiresGrad: true });
      const k = randn([1, 4, t, 16], { requiresGrad: true });
      const v = randn([1, 4, t, 16], { requiresGrad: true });
      const before = allocatedBytes();
      const y = F.scaledDotProductAttention(q, k, v, { isCausal: true });
      return allocatedBytes() - before - y.numel() * 4;
    });
  // q, k, v are contiguous already: all that is kept is the row log-sum-exp (4 * T floats)
  assert.equal(saved(256), 4 * 256 * 4);
  assert.equal(saved(1024), 4 * 1024 * 4);
});

Deno.test("scaledDotProductAttention: refuses bad shapes and options, naming them", () => {
  const q = randn([2, 3, 4]), k = randn([2, 5, 4]), v = randn([2, 5, 6]);
  assert.throws(() => F.scaledDotProductAttention(q, randn([2, 5, 3]), v), /k \[2, 5, 3\]/);
  assert.throws(() => F.scaledDotProductAttention(q, k, randn([2, 4, 6])), /v \[2, 4, 6\]/);
  assert.throws(() => F.scaledDotProductAttention(randn([3, 3, 4]), k, v), /leading dimensions/);
  assert.throws(
    () => F.scaledDotProductAttention(q, k, v, { dropoutP: 1 }),
    /dropoutP must be in \[0, 1\), got 1/,
  );
  assert.throws(
    () => F.scaledDotProductAttention(q, k, v, { isCausal: true, attnMask: randn([3, 5]) }),
    /either attnMask or isCausal/,
  );
  assert.throws(() => F.scaledDotProductAttention(q, k, v, { attnMask: randn([4, 5]) }), /expand/);
});

Deno.test("narrow, select, split and chunk refuse out-of-range arguments, naming them", () => {
  const x = randn([4, 6]);
  assert.throws(() => x.narrow(1, 4, 3), /start 4 \+ length 3 exceeds dimension 1 of size 6/);
  assert.throws(() => x.select(0, 4), /index 4 is out of range for dimension 0 of size 4/);
  assert.throws(() => x.split([2, 3], 1), /adding up to 6/);
  assert.throws(() => x.chunk(0), /positive integer, got 0/);
  assert.throws(() => x.transpose(0, 1).view([24]), /not compatible with a view/);
});

Deno.test("scaledDotProductAttention reads strided heads in place and matches contiguous inputs", () => {
  // q, k, v as GPT makes them: [B, T, H, hs] projections with the heads moved forward (views).
  const make = () => randn([2, 5, 3, 4], { requiresGrad: true });
  const [q, k, v] = [make(), make(), make()];
  const heads = (x: Tensor) => x.transpose(1, 2);
  const g = randn([2, 3, 5, 4]);
  const strided = F.scaledDotProductAttention(heads(q), heads(k), heads(v), { isCausal: true });
  strided.mul(g).sum().backward();
  const grads = [q, k, v].map((x) => Array.from(x.grad!.toArray()));
  const [qc, kc, vc] = [q, k, v].map((x) => heads(x).detach().contiguous().requiresGrad_(true));
  const dense = F.scaledDotProductAttention(qc, kc, vc, { isCausal: true });
  dense.mul(g).sum().backward();
  assertClose(strided, Array.from(dense.toArray()), "output");
  [qc, kc, vc].forEach((x, i) =>
    assertClose(Array.from(x.grad!.transpose(1, 2).contiguous().toArray()), grads[i], `grad ${i}`)
  );
});

Deno.test("packedCausalAttention equals split + scaledDotProductAttention, dropout included", () => {
  const [b, t, c, h] = [2, 7, 12, 3];
  const qkv = randn([b, t, 3 * c], { requiresGrad: true });
  const g = randn([b, t, c]);
  const state = getRngState();
  const packed = packedCausalAttention(qkv, h, 0.2);
  packed.mul(g).sum().backward();
  const packedGrad = Array.from(qkv.grad!.toArray());
  qkv.grad = null;
  setRngState(state);
  const heads = (x: Tensor) => x.view(b, t, h, c / h).transpose(1, 2);
  const [q, k, v] = qkv.split(c, 2).map(heads);
  const y = F.scaledDotProductAttention(q, k, v, { isCausal: true, dropoutP: 0.2 })
    .transpose(1, 2).reshape([b, t, c]);
  y.mul(g).sum().backward();
  assertClose(packed, Array.from(y.toArray()), "output");
  assertClose(packedGrad, Array.from(qkv.grad!.toArray()), "grad of qkv");
});
