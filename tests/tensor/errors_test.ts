/**
 * Bad inputs give errors that name the problem and the values seen, of the right class.
 * @module
 */

import assert from "node:assert/strict";
import { manualSeed, NativeArgumentError, randn, tensor, tidy, zeros } from "../../mod.ts";
import { linear } from "../../src/tensor/ops/matmul.ts";
import { dropout, embedding, layerNorm, mseLoss } from "../../src/tensor/ops/nn.ts";
import { crossEntropy } from "../../src/tensor/ops/cross_entropy.ts";

/** Asserts that `fn` throws an instance of `kind` whose message matches `message`. */
function throwsWith(fn: () => unknown, kind: ErrorConstructor, message: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof kind, `expected a ${kind.name}, got ${e}`);
    assert.match((e as Error).message, message);
    return true;
  });
}

const i32 = (values: number[], shape = [values.length]) =>
  tensor(Int32Array.from(values), shape, { dtype: "i32" });

Deno.test("matmul names both shapes when the inner dimensions differ", () => {
  tidy(() => {
    throwsWith(
      () => zeros([3, 4]).matmul(zeros([5, 2])),
      RangeError,
      /matmul: shapes \[3, 4\] and \[5, 2\] cannot be multiplied \(4 != 5\)/,
    );
    throwsWith(
      () => zeros([2, 3, 4]).matmul(zeros([2, 5, 2])),
      RangeError,
      /matmul: shapes \[2, 3, 4\] and \[2, 5, 2\] cannot be multiplied/,
    );
    throwsWith(
      () => zeros([4]).matmul(zeros([5])),
      RangeError,
      /matmul: shapes \[4\] and \[5\] cannot be multiplied \(4 != 5\)/,
    );
    throwsWith(
      () => zeros([2, 3, 4]).matmul(zeros([3, 4, 2])),
      RangeError,
      /matmul: the batch dimensions of \[2, 3, 4\] and \[3, 4, 2\] cannot be broadcast together \(\[2\] and \[3\]\)/,
    );
  });
});

Deno.test("add, sub, mul, div name both shapes when they cannot broadcast", () => {
  tidy(() => {
    for (const op of ["add", "sub", "mul", "div"] as const) {
      throwsWith(
        () => zeros([3, 4])[op](zeros([3])),
        RangeError,
        new RegExp(`${op}: shapes \\[3, 4\\] and \\[3\\] cannot be broadcast together`),
      );
    }
    throwsWith(() => zeros([2, 3]).add(zeros([3, 3])), RangeError, /\[2, 3\] and \[3, 3\]/);
  });
});

Deno.test("f32 ops reject i32 tensors and name the dtype", () => {
  tidy(() => {
    const ints = i32([1, 2, 3]);
    // add and sum take i32 since issue 8 (PyTorch's promotion; tests/tensor/compare_test.ts).
    throwsWith(() => ints.log(), TypeError, /log: expected an f32 tensor, got i32 \[3\]/);
    throwsWith(() => ints.exp(), TypeError, /exp: expected an f32 tensor, got i32/);
    throwsWith(() => ints.mean(), TypeError, /mean: expected an f32 tensor, got i32/);
    throwsWith(
      () => i32([1, 2, 3, 4], [2, 2]).matmul(zeros([2, 2])),
      TypeError,
      /matmul: expected an f32 tensor, got i32 \[2, 2\]/,
    );
    throwsWith(() => ints.softmax(), TypeError, /softmax: expected an f32 tensor/);
    throwsWith(
      () => tensor([1, 2], [2], { dtype: "i32", requiresGrad: true }),
      TypeError,
      /only floating-point tensors \(f32, bf16, f16\) can require gradients, not i32/,
    );
  });
});

Deno.test("crossEntropy checks the target's dtype and the shapes", () => {
  tidy(() => {
    throwsWith(
      () => crossEntropy(zeros([2, 3]), tensor([0, 1])),
      TypeError,
      /crossEntropy: target must be i32 class indices, got f32/,
    );
    throwsWith(
      () => crossEntropy(zeros([2, 3]), i32([0, 1, 2])),
      RangeError,
      /crossEntropy: expected logits \[N, C\] and target \[N\], got \[2, 3\] and \[3\]/,
    );
  });
});

Deno.test("crossEntropy reports an out-of-range class with the native message as a RangeError", () => {
  tidy(() => {
    for (const [target, row] of [[5, 1], [-1, 2]]) {
      const values = [0, 0, 0];
      values[row] = target;
      assert.throws(
        () => crossEntropy(zeros([3, 5], { requiresGrad: true }), i32(values)),
        (e: unknown) => {
          assert.ok(e instanceof NativeArgumentError, `expected a NativeArgumentError, got ${e}`);
          assert.ok(e instanceof RangeError);
          assert.equal(e.name, "RangeError");
          assert.equal(e.status, 1);
          assert.equal(
            e.message,
            `crossEntropy: target ${target} at row ${row} is out of range [0, 5)`,
          );
          return true;
        },
      );
    }
  });
});

Deno.test({
  name: "native argument errors are instances of RangeError",
  fn: () => {
    tidy(() => {
      assert.throws(() => crossEntropy(zeros([2, 3]), i32([0, 3])), RangeError);
      assert.throws(() => embedding(i32([10]), zeros([10, 4])), RangeError);
    });
  },
});

Deno.test("embedding reports an out-of-range or negative index, and wrong dtypes", () => {
  tidy(() => {
    const weight = zeros([10, 4]);
    for (const [bad, position] of [[10, 2], [-3, 0]]) {
      const idx = [1, 2, 3];
      idx[position] = bad;
      assert.throws(() => embedding(i32(idx), weight), (e: unknown) => {
        assert.ok(e instanceof NativeArgumentError && e instanceof RangeError);
        assert.equal(e.name, "RangeError");
        assert.equal(
          e.message,
          `embedding: index ${bad} at position ${position} is out of range [0, 10)`,
        );
        return true;
      });
    }
    throwsWith(
      () => embedding(tensor([1, 2]), weight),
      TypeError,
      /embedding: indices must be i32, got f32/,
    );
    throwsWith(
      () => embedding(i32([1]), zeros([10])),
      RangeError,
      /embedding: weight must be 2-d, got \[10\]/,
    );
  });
});

Deno.test("reshape to an incompatible size names the shape and the element count", () => {
  tidy(() => {
    const t = zeros([3, 4]);
    throwsWith(
      () => t.reshape(5, 3),
      RangeError,
      /reshape: shape \[5, 3\] is invalid for input of size 12/,
    );
    throwsWith(() => t.view([-1, -1]), RangeError, /reshape: only one dimension can be -1/);
    throwsWith(() => t.reshape(2, 2), RangeError, /\[2, 2\] is invalid for input of size 12/);
    assert.deepEqual(t.reshape(-1, 6).shape, [2, 6]);
  });
});

Deno.test({
  name: "reshape with -1 that does not divide the size names the requested shape and the size",
  fn: () => {
    tidy(() => {
      throwsWith(
        () => zeros([3, 4]).reshape(-1, 5),
        RangeError,
        /reshape: shape \[-1, 5\] is invalid for input of size 12/,
      );
    });
  },
});

Deno.test("item() on a multi-element tensor names its shape and size", () => {
  tidy(() => {
    throwsWith(
      () => zeros([2, 2]).item(),
      RangeError,
      /item\(\): tensor \[2, 2\] has 4 elements, not 1/,
    );
    throwsWith(() => zeros([0]).item(), RangeError, /has 0 elements/);
    assert.equal(tensor([7], [1, 1]).item(), 7);
  });
});

Deno.test("dropout rejects a probability outside [0, 1]", () => {
  tidy(() => {
    for (const p of [-0.1, 1.5, NaN]) {
      throwsWith(
        () => dropout(zeros([4]), p),
        RangeError,
        new RegExp(`dropout: probability ${p} is outside \\[0, 1\\]`),
      );
    }
  });
});

Deno.test("shape errors of the nn ops name both shapes", () => {
  tidy(() => {
    throwsWith(
      () => mseLoss(zeros([2, 3]), zeros([3, 2])),
      RangeError,
      /mseLoss: input \[2, 3\] and target \[3, 2\] differ/,
    );
    throwsWith(
      () => layerNorm(zeros([2, 3]), [4]),
      RangeError,
      /layerNorm: normalizedShape \[4\] does not end input \[2, 3\]/,
    );
    throwsWith(
      () => layerNorm(zeros([2, 3]), [3], zeros([4])),
      RangeError,
      /layerNorm: weight \[4\] does not match \[3\]/,
    );
    throwsWith(
      () => linear(zeros([2, 3]), zeros([4, 5])),
      RangeError,
      /linear: input \[2, 3\] does not match weight \[4, 5\]/,
    );
    throwsWith(
      () => linear(zeros([2, 3]), zeros([4, 3]), zeros([5])),
      RangeError,
      /linear: bias \[5\] does not match 4 output features/,
    );
  });
});

Deno.test("dimension, view and creation errors say what was wrong", () => {
  tidy(() => {
    const t = zeros([2, 3]);
    throwsWith(() => t.sum(2), RangeError, /sum: dimension 2 is out of range for a 2-d tensor/);
    throwsWith(() => t.transpose(0, -3), RangeError, /transpose: dimension -3 is out of range/);
    throwsWith(() => t.softmax(2), RangeError, /softmax: dimension 2 is out of range for a 2-d/);
    throwsWith(() => zeros([2, 3, 4]).t(), RangeError, /t\(\): expects a tensor with <= 2/);
    throwsWith(() => t.expand(4, 3), RangeError, /expand: cannot expand \[2, 3\] to \[4, 3\]/);
    throwsWith(
      () => t.gelu("fast" as "tanh"),
      RangeError,
      /gelu: approximate must be "none" or "tanh", got "fast"/,
    );
    throwsWith(() => tensor([1, 2, 3], [2, 2]), RangeError, /3 values do not fill shape \[2, 2\]/);
    throwsWith(() => tensor([[1, 2], [3]]), RangeError, /ragged nested array/);
    throwsWith(() => zeros([2, -1]), RangeError, /zeros: invalid shape \[2, -1\]/);
    // cuda:99 exists nowhere: unavailable without a GPU, past the devices with one.
    throwsWith(
      () => randn([2], { device: "cuda:99" }),
      Error,
      /device "cuda:99" (is not available|does not exist)/,
    );
    throwsWith(() => manualSeed(-1), RangeError, /manualSeed: seed -1/);
    throwsWith(
      () => zeros([2]).copy_(zeros([3])),
      RangeError,
      /copy_: source f32 \[3\] does not match f32 \[2\]/,
    );
  });
});
