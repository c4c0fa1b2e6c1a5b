// packedCausalAttention refuses a head count that is not a positive integer: 1.5 heads passed the
// divisibility test (36 % 4.5 === 0) and the kernel read past the tensor (a tensor-parallel plan
// that cut heads in half crashed its rank with SIGSEGV).
import assert from "node:assert/strict";
import { packedCausalAttention } from "../../src/tensor/ops/attention.ts";
import { randn } from "../../src/tensor/creation.ts";

Deno.test("packedCausalAttention refuses 1.5, 0 and -2 heads, naming the count", () => {
  const qkv = randn([1, 4, 36]);
  for (const heads of [1.5, 0, -2]) {
    assert.throws(
      () => packedCausalAttention(qkv, heads),
      new RegExp(
        `packedCausalAttention: expected \\[B, T, 3C\\] with C divisible by ${heads} heads \\(a positive integer\\), got \\[1, 4, 36\\]`,
      ),
    );
  }
});
