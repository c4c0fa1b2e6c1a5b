/**
 * The autograd engine's contract: accumulation, noGrad, detach, retained and released graphs,
 * post-accumulate-grad hooks, and the in-place guard.
 * @module
 */

import assert from "node:assert/strict";
import { isGradEnabled, noGrad, type Tensor, tensor, tidy } from "../../mod.ts";
import { linear } from "../../src/tensor/ops/matmul.ts";

const values = (t: Tensor | null): number[] => {
  assert.ok(t !== null, "expected a gradient, got null");
  return Array.from(t.toArray());
};

Deno.test("gradients accumulate across two backward calls", () => {
  tidy(() => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    x.mul(x).sum().backward();
    assert.deepEqual(values(x.grad), [2, 4, 6]);
    x.mul(3).sum().backward();
    assert.deepEqual(values(x.grad), [5, 7, 9]);
  });
});

Deno.test("a leaf used twice gets the sum of both contributions", () => {
  tidy(() => {
    const x = tensor([1, -2, 3], [3], { requiresGrad: true });
    x.add(x).sum().backward();
    assert.deepEqual(values(x.grad), [2, 2, 2]);
    const m = tensor([[1, 2], [3, 4]], undefined, { requiresGrad: true });
    // d sum(M @ M) / dM[a, b] = rowSum(M)[b] + colSum(M)[a], with row sums [3, 7], column sums [4, 6].
    m.matmul(m).sum().backward();
    assert.deepEqual(values(m.grad), [7, 11, 9, 13]);
  });
});

Deno.test("non-leaf tensors get no .grad, and leaves report isLeaf", () => {
  tidy(() => {
    const x = tensor([1, 2], [2], { requiresGrad: true });
    const y = x.mul(2);
    y.sum().backward();
    assert.equal(y.grad, null);
    assert.ok(x.isLeaf);
    assert.ok(!y.isLeaf);
    assert.deepEqual(values(x.grad), [2, 2]);
  });
});

Deno.test("noGrad records nothing and restores grad mode, even when fn throws", () => {
  tidy(() => {
    const x = tensor([1, 2], [2], { requiresGrad: true });
    const y = noGrad(() => {
      assert.equal(isGradEnabled(), false);
      return x.mul(2).exp();
    });
    assert.equal(isGradEnabled(), true);
    assert.equal(y.requiresGrad, false);
    assert.equal(y.gradFn, null);
    assert.throws(() => y.sum().backward(), /does not require grad/);
    assert.throws(() =>
      noGrad(() => {
        throw new Error("boom");
      }), /boom/);
    assert.equal(isGradEnabled(), true);
    assert.ok(noGrad(() => noGrad(() => x.mul(2))).gradFn === null);
  });
});

Deno.test("detach shares memory but cuts the graph", () => {
  tidy(() => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const d = x.detach();
    assert.equal(d.requiresGrad, false);
    assert.equal(d.gradFn, null);
    assert.equal(d.storage, x.storage);
    const y = x.mul(d);
    y.sum().backward();
    assert.deepEqual(values(x.grad), [1, 2, 3]);
    d.fill_(5);
    assert.deepEqual(Array.from(x.toArray()), [5, 5, 5]);
    const z = x.mul(2).detach();
    assert.equal(z.requiresGrad, false);
    assert.throws(() => z.sum().backward(), /does not require grad/);
  });
});

Deno.test("a second backward through a released graph throws; retainGraph allows it", () => {
  tidy(() => {
    const x = tensor([1, 2], [2], { requiresGrad: true });
    const loss = x.exp().sum();
    loss.backward();
    assert.throws(
      () => loss.backward(),
      (e: Error) => /second time/.test(e.message) && /retainGraph/.test(e.message),
    );

    const y = tensor([1, 2], [2], { requiresGrad: true });
    const retained = y.mul(y).sum();
    retained.backward(undefined, { retainGraph: true });
    retained.backward(undefined, { retainGraph: true });
    retained.backward();
    assert.deepEqual(values(y.grad), [6, 12]);
    assert.throws(() => retained.backward(), /second time/);
  });
});

Deno.test("backward checks the root: requires grad, scalar or a gradient of its shape", () => {
  tidy(() => {
    const x = tensor([1, 2], [2], { requiresGrad: true });
    assert.throws(() => tensor([1]).backward(), /does not require grad/);
    assert.throws(() => x.mul(2).backward(), /implicitly created only for scalar outputs.*\[2\]/);
    assert.throws(() => x.mul(2).backward(tensor([1, 1, 1])), /gradient shape \[3\].*\[2\]/);
    x.mul(2).backward(tensor([1, 10]));
    assert.deepEqual(values(x.grad), [2, 20]);
  });
});

Deno.test("backward on a leaf root accumulates the gradient into it and runs its hooks", () => {
  tidy(() => {
    const x = tensor([1, 2], [2], { requiresGrad: true });
    let calls = 0;
    x.registerPostAccumulateGradHook(() => calls++);
    x.backward(tensor([3, 4]));
    assert.deepEqual(values(x.grad), [3, 4]);
    assert.equal(calls, 1);
  });
});

// ---------------------------------------------------------------- post-accumulate-grad hooks

/** A 3-layer linear chain; returns its parameters by name and the loss function. */
function linearChain() {
  const p = (rows: number, cols: number, seed: number) => {
    const data = Array.from({ length: rows * cols }, (_, i) => Math.sin(seed * 7 + i) * 0.5);
    return tensor(data, cols === 1 ? [rows] : [rows, cols], { requiresGrad: true });
  };
  const params: Record<string, Tensor> = {
    w1: p(5, 4, 1),
    b1: p(5, 1, 2),
    w2: p(6, 5, 3),
    b2: p(6, 1, 4),
    w3: p(3, 6, 5),
    b3: p(3, 1, 6),
  };
  const x = tensor(Array.from({ length: 8 }, (_, i) => i / 8 - 0.4), [2, 4]);
  const loss = () => {
    const h1 = linear(x, params.w1, params.b1).relu();
    const h2 = linear(h1, params.w2, params.b2).tanh();
    return linear(h2, params.w3, params.b3).pow(2).mean();
  };
  return { params, loss };
}

Deno.test("post-accumulate-grad hooks fire once per leaf, last layer first", () => {
  tidy(() => {
    const { params, loss } = linearChain();
    const order: string[] = [];
    const seenW1Grad: (number[] | null)[] = [];
    for (const [name, t] of Object.entries(params)) {
      t.registerPostAccumulateGradHook((leaf) => {
        assert.equal(leaf, t);
        assert.ok(leaf.grad !== null, `${name}: hook ran before its gradient was set`);
        order.push(name);
        if (name === "w3") seenW1Grad.push(params.w1.grad && values(params.w1.grad));
      });
    }
    loss().backward();
    assert.deepEqual(order, ["w3", "b3", "w2", "b2", "w1", "b1"]);
    // The last layer's hook ran while backward was still going: w1 had no gradient yet.
    assert.deepEqual(seenW1Grad, [null]);
    loss().backward();
    assert.equal(order.length, 12, "hooks fire once per leaf per backward");
  });
});

Deno.test("a leaf used several times fires its hook once, with the complete gradient", () => {
  tidy(() => {
    const make = () => tensor([0.5, -1, 2, 0.25], [2, 2], { requiresGrad: true });
    const x = tensor([1, 2, -1, 0.5], [2, 2]);
    // w is used three times in different places of the graph (weight tying).
    const f = (w: Tensor) => linear(linear(x, w).tanh(), w).mul(w).sum();
    const reference = make();
    f(reference).backward();
    const expected = values(reference.grad);

    const w = make();
    const seen: number[][] = [];
    w.registerPostAccumulateGradHook((leaf) => seen.push(values(leaf.grad)));
    f(w).backward();
    assert.deepEqual(seen, [expected]);
  });
});

Deno.test("hooks never fire for leaves that got no gradient", () => {
  tidy(() => {
    const used = tensor([1, 2], [2], { requiresGrad: true });
    const unused = tensor([3, 4], [2], { requiresGrad: true });
    const detachedOnly = tensor([5, 6], [2], { requiresGrad: true });
    const fired: string[] = [];
    used.registerPostAccumulateGradHook(() => fired.push("used"));
    unused.registerPostAccumulateGradHook(() => fired.push("unused"));
    detachedOnly.registerPostAccumulateGradHook(() => fired.push("detachedOnly"));
    unused.mul(2);
    used.mul(detachedOnly.detach()).sum().backward();
    assert.deepEqual(fired, ["used"]);
    assert.equal(unused.grad, null);
    assert.equal(detachedOnly.grad, null);
  });
});

Deno.test("a removed hook no longer fires; hooks need a leaf that requires grad", () => {
  tidy(() => {
    const x = tensor([1, 2], [2], { requiresGrad: true });
    let calls = 0;
    const remove = x.registerPostAccumulateGradHook(() => calls++);
    x.mul(2).sum().backward();
    remove();
    x.mul(2).sum().backward();
    assert.equal(calls, 1);
    assert.throws(() => x.mul(2).registerPostAccumulateGradHook(() => {}), /leaf/);
    assert.throws(() => tensor([1]).registerPostAccumulateGradHook(() => {}), /leaf/);
  });
});

// ---------------------------------------------------------------- in place

Deno.test("in-place ops on a tensor that requires grad throw outside noGrad", () => {
  tidy(() => {
    const x = tensor([1, 2, 3], [3], { requiresGrad: true });
    const other = tensor([1, 1, 1]);
    const ops: [string, () => unknown][] = [
      ["fill_", () => x.fill_(0)],
      ["zero_", () => x.zero_()],
      ["copy_", () => x.copy_(other)],
      ["add_", () => x.add_(other)],
      ["mul_", () => x.mul_(2)],
    ];
    for (const [name, op] of ops) {
      assert.throws(
        op,
        (e: Error) => e.message.includes("requires grad") && e.message.includes("noGrad"),
        name,
      );
    }
    assert.deepEqual(Array.from(x.toArray()), [1, 2, 3]);
    const y = x.mul(2);
    assert.throws(() => y.add_(other), /requires grad/);
    noGrad(() => x.add_(other, 2).mul_(3));
    assert.deepEqual(Array.from(x.toArray()), [9, 12, 15]);
  });
});

Deno.test("in-place ops need a contiguous tensor", () => {
  tidy(() => {
    const x = tensor([[1, 2], [3, 4]]);
    assert.throws(() => x.t().fill_(0), /contiguous/);
  });
});
