// nn.utils.checkpoint and parallel.applyActivationCheckpointing: checkpointed gradients equal a
// plain backward's bit for bit (the same kernels in the same order), dropout replays its masks,
// the random stream is left as a plain step leaves it, and forward keeps less memory.
import assert from "node:assert/strict";
import { backwardAsync } from "../../src/tensor/autograd.ts";
import {
  allocatedBytes,
  autocast,
  getRngState,
  manualSeed,
  nn,
  noGrad,
  parallel,
  randn,
  type Tensor,
  tensor,
} from "../../mod.ts";

const { checkpoint, checkpointWith } = nn.utils;
const CONFIG = { vocabSize: 64, blockSize: 16, nLayer: 2, nHead: 4, nEmbd: 32, dropout: 0.1 };

function tokens(seed: number): { idx: Tensor; targets: Tensor } {
  manualSeed(seed);
  const draw = () =>
    tensor(Array.from({ length: 2 * 16 }, (_, i) => (i * 7 + seed * 13) % 64), [2, 16], {
      dtype: "i32",
    });
  return { idx: draw(), targets: draw() };
}

/** A fresh model of the same weights (one seed), in training mode. */
function gpt(): nn.GPT {
  manualSeed(0);
  return new nn.GPT(CONFIG);
}

/** Every parameter's gradient, by name, as plain arrays. */
function gradsOf(model: nn.Module): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const [name, p] of model.namedParameters()) out[name] = Array.from(p.grad!.toArray());
  return out;
}

/** One GPT forward and backward from a fixed random state; the gradients, loss and state after. */
function gptStep(model: nn.GPT, forward: (idx: Tensor, targets: Tensor) => Tensor) {
  const { idx, targets } = tokens(1);
  manualSeed(42);
  const loss = forward(idx, targets);
  loss.backward();
  return { grads: gradsOf(model), loss: loss.item(), rng: getRngState() };
}

Deno.test("checkpoint: an MLP's input and parameter gradients equal a plain backward's", () => {
  manualSeed(3);
  const mlp = new nn.MLP([8, 16, 16, 4]);
  const x = randn([5, 8], { requiresGrad: true });
  const p = mlp.forward(x);
  p.mul(p).sum().backward();
  const want = { x: Array.from(x.grad!.toArray()), ...gradsOf(mlp) };
  mlp.zeroGrad();
  x.grad = null;
  const y = checkpoint((t: Tensor) => mlp.forward(t), x);
  assert.equal(y.gradFn?.name, "CheckpointOutput");
  y.mul(y).sum().backward();
  assert.deepStrictEqual({ x: Array.from(x.grad!.toArray()), ...gradsOf(mlp) }, want);
});

Deno.test("checkpoint: a GPT with dropout 0.1 replays its masks; gradients are bitwise equal", () => {
  const plain = gpt();
  const want = gptStep(plain, (i, t) => plain.forward(i, t).loss);
  const model = gpt();
  const got = gptStep(model, (i, t) => checkpoint((a, b) => model.forward(a, b), i, t).loss);
  assert.equal(got.loss, want.loss);
  assert.deepStrictEqual(got.grads, want.grads);
  // The recompute does not advance the training's random stream.
  assert.deepStrictEqual(got.rng, want.rng);

  // Without the replay, the recompute draws other masks: other gradients, a stream moved on.
  const loose = gpt();
  const off = gptStep(
    loose,
    (i, t) => checkpointWith({ preserveRngState: false }, (a, b) => loose.forward(a, b), i, t).loss,
  );
  assert.equal(off.loss, want.loss);
  assert.notDeepStrictEqual(off.grads, want.grads);
  assert.notDeepStrictEqual(off.rng, want.rng);
});

Deno.test("applyActivationCheckpointing: full and every 2nd of 4 blocks give plain gradients", () => {
  const four = () => {
    manualSeed(0);
    return new nn.GPT({ ...CONFIG, nLayer: 4 });
  };
  const plain = four();
  const want = gptStep(plain, (i, t) => plain.forward(i, t).loss);
  for (
    const [options, names] of [
      [{ mode: "full" }, [
        "transformer.h.0",
        "transformer.h.1",
        "transformer.h.2",
        "transformer.h.3",
      ]],
      [{ mode: "selective", every: 2 }, ["transformer.h.1", "transformer.h.3"]],
    ] as const
  ) {
    const model = four();
    assert.deepEqual(parallel.applyActivationCheckpointing(model, options), names);
    const got = gptStep(model, (i, t) => model.forward(i, t).loss);
    assert.equal(got.loss, want.loss, options.mode);
    assert.deepStrictEqual(got.grads, want.grads, options.mode);
    assert.deepStrictEqual(got.rng, want.rng, options.mode);
  }
});

Deno.test("checkpoint: Tensor, array and object outputs; non-tensor inputs pass through", () => {
  manualSeed(5);
  const fc = new nn.Linear(4, 4);
  const x = randn([3, 4], { requiresGrad: true });
  const c = randn([3, 4]); // requires no grad: gets none
  const plain = () => {
    const h = fc.forward(x);
    return [h.mul(c), h.tanh()] as const;
  };
  const [pa, pb] = plain();
  pa.sum().add(pb.mul(pb).sum()).backward();
  const want = [Array.from(x.grad!.toArray()), gradsOf(fc)];
  const check = (a: Tensor, b: Tensor, label: string) => {
    fc.zeroGrad();
    x.grad = null;
    a.sum().add(b.mul(b).sum()).backward();
    assert.deepStrictEqual([Array.from(x.grad!.toArray()), gradsOf(fc)], want, label);
    assert.equal(c.grad, null, label);
  };
  const arr = checkpoint(
    (t: Tensor, k: Tensor, scale: number) => {
      const h = fc.forward(t).mul(scale);
      return [h.mul(k), h.tanh()];
    },
    x,
    c,
    1,
  );
  check(arr[0], arr[1], "array");
  const obj = checkpoint(
    (t: Tensor, opts: { k: Tensor }) => {
      const h = fc.forward(t);
      return { a: h.mul(opts.k), b: h.tanh(), label: "kept" };
    },
    x,
    { k: c },
  );
  assert.equal(obj.label, "kept");
  check(obj.a, obj.b, "object");
  // Only one output used: the other gets no gradient, and none is needed for it.
  fc.zeroGrad();
  const one = checkpoint((t: Tensor) => [fc.forward(t).sum(), t.sum()], x);
  one[0].backward();
  assert.ok(fc.weight.grad !== null);
});

Deno.test("checkpoint: nested checkpoints, and a recompute that calls a checkpoint", () => {
  manualSeed(6);
  const mlp = new nn.Sequential(new nn.Linear(6, 12), new nn.Linear(12, 12), new nn.Linear(12, 3));
  const [l0, l1, l2] = [...mlp.children()] as nn.Linear[];
  const x = randn([4, 6], { requiresGrad: true });
  const f = (t: Tensor) => l2.forward(l1.forward(t).tanh());
  const g = (t: Tensor) => checkpoint(f, l0.forward(t)).relu();
  g(x).sum().backward();
  const want = [Array.from(x.grad!.toArray()), gradsOf(mlp)];
  mlp.zeroGrad();
  x.grad = null;
  checkpoint(g, x).sum().backward();
  assert.deepStrictEqual([Array.from(x.grad!.toArray()), gradsOf(mlp)], want);
});

Deno.test("checkpoint: inside noGrad it only calls fn; backward runs through backwardAsync", async () => {
  const fc = new nn.Linear(3, 2);
  const x = randn([2, 3]);
  const y = noGrad(() => checkpoint((t: Tensor) => fc.forward(t), x));
  assert.equal(y.requiresGrad, false);
  const z = checkpoint((t: Tensor) => fc.forward(t), x);
  await backwardAsync(z.sum());
  assert.ok(fc.weight.grad !== null);
  // A second backward through the released graph is refused, as for any graph.
  assert.throws(() => z.sum().backward(), /second time/);
});

Deno.test("checkpoint: bad inputs get clear errors", () => {
  const x = randn([2], { requiresGrad: true });
  assert.throws(() => checkpoint(42 as never, x), /fn must be a function/);
  assert.throws(() => checkpoint((_t: Tensor) => 3, x), /returned no tensor \(got 3\)/);
  assert.throws(
    () => checkpoint((_t: Tensor) => ({ a: 1 }), x),
    /returned no tensor \(got an Object\)/,
  );
  assert.throws(() => checkpoint(() => Promise.resolve(x.mul(2))), /returned a Promise/);
  assert.throws(() => checkpointWith({ preserve: true } as never, (t) => t, x), /unknown option/);
  // fn that computes something else when run again.
  let calls = 0;
  const y = checkpoint((t: Tensor) => (calls++ === 0 ? t.mul(2) : t.mul(2).reshape([1, 2])), x);
  assert.throws(() => y.sum().backward(), /recomputed output 0 is f32 \[1,2\]/);
});

Deno.test("applyActivationCheckpointing: bad options and a block wrapped twice are refused", () => {
  const model = gpt();
  const ac = parallel.applyActivationCheckpointing;
  assert.throws(() => ac(model, { mode: "some" as never }), /mode must be "full" or "selective"/);
  assert.throws(() => ac(model, { mode: "selective" }), /needs every: a positive integer/);
  assert.throws(() => ac(model, { mode: "selective", every: 0 }), /positive integer, got 0/);
  assert.throws(() => ac(model, { mode: "full", every: 2 }), /every applies to mode "selective"/);
  assert.throws(() => ac(new nn.MLP([2, 2]), { mode: "full" }), /not an nn.GPT; say which/);
  assert.throws(() => ac(model, { mode: "full", blocks: ["nope"] }), /no submodule "nope"/);
  assert.throws(() => ac(model, { mode: "full", blocks: () => false }), /predicate chose no/);
  ac(model, { mode: "full", blocks: ["transformer.h.1"] });
  assert.throws(() => ac(model, { mode: "full" }), /transformer.h.1 is already activation-/);
  // Another model by names.
  const mlp = new nn.MLP([4, 8, 2]);
  assert.deepEqual(ac(mlp, { mode: "full", blocks: (n) => n === "0" }), ["0"]);
});

/** Bytes live after a GPT forward at block size 64, over what was live before it. */
function forwardBytes(useCheckpoint: boolean): number {
  manualSeed(0);
  const model = new nn.GPT({ ...CONFIG, blockSize: 64, nLayer: 4, dropout: 0 });
  if (useCheckpoint) parallel.applyActivationCheckpointing(model, { mode: "full" });
  const idx = tensor(Array.from({ length: 4 * 64 }, (_, i) => i % 64), [4, 64], { dtype: "i32" });
  const gc = (globalThis as { gc?: () => void }).gc!;
  gc();
  const before = allocatedBytes();
  const { loss } = model.forward(idx, idx);
  gc();
  const held = allocatedBytes() - before;
  loss.backward();
  return held;
}

Deno.test("checkpoint: a fully checkpointed GPT holds under half the forward memory", () => {
  const plain = forwardBytes(false), checkpointed = forwardBytes(true);
  assert.ok(
    checkpointed < 0.5 * plain,
    `checkpointed forward holds ${checkpointed} bytes, plain ${plain}`,
  );
});

Deno.test("checkpoint: a parameter used inside and outside the region gets one hook call, after both", () => {
  manualSeed(8);
  const w = new nn.Linear(4, 4, { bias: false }).weight;
  const x = randn([3, 4], { requiresGrad: true });
  const run = (inner: (t: Tensor) => Tensor) => {
    const seen: number[][] = [];
    const remove = w.registerPostAccumulateGradHook((p) =>
      seen.push(Array.from(p.grad!.toArray()))
    );
    inner(x).matmul(w).sum().backward();
    remove();
    const grad = Array.from(w.grad!.toArray());
    w.grad = null;
    x.grad = null;
    return { seen, grad };
  };
  const f = (t: Tensor) => t.matmul(w).tanh();
  const plain = run(f);
  const got = run((t) => checkpoint(f, t));
  assert.equal(got.seen.length, 1, "the hook runs once");
  assert.deepStrictEqual(got.seen[0], got.grad, "after the gradient is complete");
  assert.deepStrictEqual(got.grad, plain.grad);
});

Deno.test("checkpoint: the recompute runs under the forward's autocast state", () => {
  const plain = gpt();
  const bf16 = <R>(fn: () => R) => autocast({ deviceType: "cpu", dtype: "bf16" }, fn);
  const want = gptStep(plain, (i, t) => bf16(() => plain.forward(i, t).loss));
  const model = gpt();
  parallel.applyActivationCheckpointing(model, { mode: "full" });
  const got = gptStep(model, (i, t) => bf16(() => model.forward(i, t).loss));
  assert.equal(got.loss, want.loss);
  assert.deepStrictEqual(got.grads, want.grads);
});
