// bf16 and f16 on cpu: made, converted, read and printed with PyTorch's bits and text
// (tests/fixtures/gen_half.py); emu and cuda run the same conversions in half_cuda_test.ts.

import assert from "node:assert/strict";
import {
  arange,
  full,
  manualSeed,
  ones,
  rand,
  randn,
  tensor,
  zeros,
  zerosLike,
} from "../../mod.ts";
import type { DType } from "../../mod.ts";
import { assertBits, bits16, checkConversions, f32Of, fixture, tables } from "./_half_fixture.ts";

Deno.test("f32 to bf16 and f16, and back, have PyTorch's bits for every fixture value on cpu", () => {
  checkConversions("cpu");
});

Deno.test("tensor(values, { dtype }) rounds as torch.tensor(values, dtype=...) but for NaN bits", () => {
  const values = fixture.special.map((c) => new Float32Array(Uint32Array.of(c.f32).buffer)[0]);
  for (const [dtype, key] of [["bf16", "tensorBf16"], ["f16", "tensorF16"]] as const) {
    const got = bits16(tensor(values, [values.length], { dtype }));
    fixture.special.forEach((c, i) => {
      if (Number.isNaN(values[i])) {
        // PyTorch's scalar path writes 0x7FC0 (bf16) or 0x7E00 (f16); dtrain the kernel's NaN.
        assert.equal(got[i], c[dtype], `${c.name}: the to() bits`);
        assert.ok(Number.isNaN(tensor([values[i]], [1], { dtype }).item()), c.name);
      } else {
        assert.equal(got[i], c[key], `${c.name} as ${dtype}`);
      }
    });
  }
});

Deno.test("item() reads every bf16 and f16 pattern's exact value", () => {
  const every = tensor(Uint16Array.from({ length: 65536 }, (_, i) => i));
  for (const [dtype, table] of [["bf16", tables.bf16ToF32], ["f16", tables.f16ToF32]] as const) {
    const values = new Float32Array(table.buffer);
    const t = every.view(dtype);
    for (let h = 0; h < 65536; h += 7) {
      const got = t.select(0, h).item();
      assert.ok(Object.is(got, values[h]) || (isNaN(got) && isNaN(values[h])), `${dtype} ${h}`);
    }
  }
});

Deno.test("toArray and tolist give f32 values; view('u16') the raw bits", () => {
  const h = tensor([[1, 2.5], [1 / 3, -0]], [2, 2], { dtype: "bf16" });
  const array = h.toArray();
  assert.ok(array instanceof Float32Array);
  assert.deepEqual(Array.from(array), [1, 2.5, 0.333984375, -0]);
  assert.ok(Object.is(array[3], -0));
  assert.deepEqual(h.tolist(), [[1, 2.5], [0.333984375, -0]]);
  assert.deepEqual(tensor(3, [], { dtype: "f16" }).tolist(), 3);
  assert.deepEqual(Array.from(bits16(h)), [0x3f80, 0x4020, 0x3eab, 0x8000]);
  // A strided view reads row-major, as f32 does.
  assert.deepEqual(Array.from(h.t().toArray()), [1, 0.333984375, 2.5, -0]);
  assert.deepEqual(Array.from(h.t().view("u16").toArray()), [0x3f80, 0x3eab, 0x4020, 0x8000]);
  assert.deepEqual(Array.from(zeros([0, 2], { dtype: "f16" }).toArray()), []);
});

Deno.test("view(dtype) reinterprets between same-size dtypes, refusing other sizes by name", () => {
  const bits = tensor(Uint16Array.of(0x3f80, 0xc049, 0x7c00));
  assert.deepEqual(Array.from(bits.view("bf16").toArray()), [1, -3.140625, 2 ** 121]);
  assert.deepEqual(Array.from(bits.view("f16").toArray()), [1.875, -2.142578125, Infinity]);
  const f = tensor([1, -2]);
  assert.deepEqual(Array.from(f.view("i32").toArray()), [0x3f800000, -0x40000000]);
  assert.deepEqual(Array.from(f.view("i32").view("f32").toArray()), [1, -2]);
  // Shares memory: a write through one view shows through the other.
  const h = bits.view("f16");
  bits.copy_(tensor(Uint16Array.of(0x3c00, 0x3c00, 0x3c00)));
  assert.deepEqual(Array.from(h.toArray()), [1, 1, 1]);
  const x = tensor([1, 2], [2], { requiresGrad: true });
  assert.equal(x.view("i32").requiresGrad, false, "not differentiable, as in PyTorch");
  assert.throws(
    () => f.view("bf16"),
    /view: cannot view f32 \(4 bytes\) as bf16 \(2 bytes\); dtrain views only between dtypes of one size/,
  );
  assert.throws(() => bits.view("bool"), /cannot view u16 \(2 bytes\) as bool \(1 bytes\)/);
  assert.throws(() => bits.view("bfloat16" as DType), /view: unknown dtype "bfloat16"/);
});

Deno.test("a Uint16Array with dtype bf16 or f16 is refused: values or bits is not guessed", () => {
  for (const dtype of ["bf16", "f16"] as const) {
    assert.throws(
      () => tensor(Uint16Array.of(16256), [1], { dtype }),
      new RegExp(
        `tensor: a Uint16Array with dtype ${dtype} could be values or raw bits; for bits use ` +
          `tensor\\(bits\\)\\.view\\("${dtype}"\\), for values pass a Float32Array`,
      ),
    );
  }
  // Every other typed array gives values, as PyTorch's torch.tensor(array, dtype=...).
  assert.deepEqual(Array.from(tensor(Int32Array.of(3, 257), [2], { dtype: "bf16" }).toArray()), [
    3,
    256,
  ]);
  assert.deepEqual(Array.from(tensor(BigInt64Array.of(5n), [1], { dtype: "f16" }).toArray()), [5]);
  assert.deepEqual(Array.from(tensor(Uint8Array.of(7), [1], { dtype: "f16" }).toArray()), [7]);
});

Deno.test("full, ones, zeros, zerosLike, arange and newEmpty make bf16 and f16 tensors", () => {
  assertBits(bits16(full([3], 0.1, { dtype: "f16" })), [0x2e66, 0x2e66, 0x2e66], "full f16");
  assertBits(bits16(full([2], 1e6, { dtype: "f16" })), [0x7c00, 0x7c00], "overflow is inf");
  assertBits(bits16(full([1], -1e39, { dtype: "bf16" })), [0xff80], "bf16 overflow is -inf");
  assertBits(bits16(ones([2, 2], { dtype: "bf16" })), [0x3f80, 0x3f80, 0x3f80, 0x3f80], "ones");
  const z = zeros([2, 3], { dtype: "bf16" });
  assert.equal(z.dtype, "bf16");
  assertBits(bits16(z), [0, 0, 0, 0, 0, 0], "zeros are +0");
  assert.equal(zerosLike(z).dtype, "bf16");
  assert.equal(zerosLike(z, { dtype: "f16" }).dtype, "f16");
  assert.deepEqual(Array.from(arange(0, 3, 1, { dtype: "f16" }).toArray()), [0, 1, 2]);
  assert.deepEqual(Array.from(arange(0, 0.3, 0.1, { dtype: "bf16" }).toArray()), [
    0,
    0.10009765625,
    0.2001953125,
  ]);
  // fill_ and zero_ round as full does (one conversion kernel), not writing f32 or byte patterns.
  assertBits(bits16(z.fill_(1 / 3)), new Array(6).fill(0x3eab), "fill_ bf16");
  assertBits(bits16(zeros([2], { dtype: "f16" }).fill_(-70000)), [0xfc00, 0xfc00], "fill_ f16");
  assertBits(bits16(z.zero_()), [0, 0, 0, 0, 0, 0], "zero_");
  const e = z.newEmpty([4]);
  assert.equal(e.dtype, "bf16");
  assert.equal(e.storage.nbytes, 8, "2 bytes an element");
  assertBits(bits16(z.newEmpty([2], { zero: true, dtype: "f16" })), [0, 0], "newEmpty zero");
});

Deno.test("randn and rand with dtype bf16 or f16 are the f32 draw rounded, as in PyTorch", () => {
  for (const dtype of ["bf16", "f16"] as const) {
    for (const sample of [randn, rand]) {
      manualSeed(7);
      const wide = sample([257]);
      manualSeed(7);
      const half = sample([257], { dtype });
      assert.equal(half.dtype, dtype);
      assertBits(bits16(half), bits16(wide.to(dtype)), `${sample.name} ${dtype}`);
    }
  }
  assert.throws(
    () => randn([2], { dtype: "i32" }),
    /randn: makes floating-point tensors \(f32, bf16, f16\), not i32/,
  );
  assert.throws(() => rand([2], { dtype: "u16" }), /rand: makes floating-point tensors/);
  assert.throws(() => randn([2], { dtype: "half" as DType }), /randn: unknown dtype "half"/);
});

Deno.test("bfloat16(), half() and float() convert as to() does, keeping the graph", () => {
  const x = tensor([1.0078125, 3.1416, 70000], [3], { requiresGrad: true });
  const b = x.bfloat16(), h = x.half();
  assert.equal(b.dtype, "bf16");
  assert.equal(h.dtype, "f16");
  assertBits(bits16(b), bits16(x.to("bf16")), "bfloat16()");
  assertBits(bits16(h), [0x3c08, 0x4248, 0x7c00], "half()");
  assert.equal(b.gradFn?.name, "ToCopyBackward");
  assert.deepEqual(Array.from(h.float().toArray()), [1.0078125, 3.140625, Infinity]);
  assert.equal(h.float().dtype, "f32");
  // A bf16 leaf requires grad and gets a bf16 gradient, as in PyTorch.
  const leaf = tensor([1, 2], [2], { dtype: "bf16", requiresGrad: true });
  leaf.mul(3).sum().backward();
  assert.equal(leaf.grad?.dtype, "bf16");
  assert.deepEqual(Array.from(leaf.grad!.toArray()), [3, 3]);
  assert.throws(
    () => tensor([1, 2], [2], { dtype: "i32", requiresGrad: true }),
    /requiresGrad: only floating-point tensors \(f32, bf16, f16\) can require gradients, not i32/,
  );
});

Deno.test("bf16 and f16 print as PyTorch prints them, with dtype=bf16 / dtype=f16", () => {
  for (const c of fixture.reprs) {
    const values = new Float32Array(Uint32Array.from(c.f32).buffer);
    const t = tensor(values, c.shape, { dtype: c.dtype });
    const expected = c.repr.replace("dtype=torch.bfloat16", "dtype=bf16").replace(
      "dtype=torch.float16",
      "dtype=f16",
    );
    assert.equal(String(t), expected);
  }
  const g = tensor([1, 2], [2], { requiresGrad: true }).half();
  assert.equal(String(g), "tensor([1., 2.], dtype=f16, gradFn=<ToCopyBackward>)");
  assert.equal(String(f32Of([0x3f800000], "cpu").bfloat16()), "tensor([1.], dtype=bf16)");
});

Deno.test("PyTorch's names of the 2-byte floats are refused with dtrain's as the hint", () => {
  for (const [name, short] of [["bfloat16", "bf16"], ["float16", "f16"], ["half", "f16"]]) {
    const hint = new RegExp(
      `unknown dtype "${name}" .*; dtrain calls PyTorch's ${name} "${short}"`,
    );
    assert.throws(() => tensor([1], [1], { dtype: name as DType }), hint);
    assert.throws(() => zeros([1], { dtype: name as DType }), hint);
    assert.throws(() => full([1], 1, { dtype: name as DType }), hint);
    assert.throws(() => tensor([1]).view(name as DType), hint);
  }
});

Deno.test("to() refuses a 2-byte float to u16, naming both dtypes", () => {
  assert.throws(
    () => tensor([1], [1], { dtype: "bf16" }).to("u16"),
    /to: bf16 to u16 is not supported/,
  );
});
