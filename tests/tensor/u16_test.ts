// u16: storage for token ids. Tensors hold it (2 bytes an element), views, copies and devices
// move it, `.to("i32")` converts it (a kernel on every device), and every op that computes
// refuses it by name. i64 data converts to i32 when it fits and is refused when it does not.
import assert from "node:assert/strict";
import {
  cat,
  type DType,
  eq,
  F,
  full,
  gather,
  indexSelect,
  maskedFill,
  type Tensor,
  tensor,
  where,
  zeros,
} from "../../mod.ts";
import { itemSize } from "../../src/tensor/dtype.ts";
import { gatherRows } from "../../src/data/tensor_dataset.ts";
import { deviceTest } from "../_harness/devices.ts";

const tokens = () => new Uint16Array([0, 1, 255, 256, 50256, 65535, 7, 8]);

Deno.test("a Uint16Array makes a u16 tensor of 2-byte elements that reads back as it went in", () => {
  const t = tensor(tokens(), [2, 4]);
  assert.equal(t.dtype, "u16");
  assert.equal(itemSize("u16"), 2);
  assert.equal(t.storage.nbytes, 16);
  assert.deepStrictEqual(t.toArray(), tokens());
  assert.equal(t.select(0, 1).select(0, 1).item(), 65535);
  assert.deepStrictEqual(t.tolist(), [[0, 1, 255, 256], [50256, 65535, 7, 8]]);
  assert.equal(
    String(t),
    "tensor([[    0,     1,   255,   256],\n        [50256, 65535,     7,     8]], dtype=u16)",
  );
  assert.deepStrictEqual(
    tensor([3, 65535], [2], { dtype: "u16" }).toArray(),
    new Uint16Array([3, 65535]),
  );
  assert.deepStrictEqual(zeros([3], { dtype: "u16" }).toArray(), new Uint16Array(3));
});

Deno.test("views of a u16 tensor step 2 bytes: narrow, transpose and contiguous copies", () => {
  const t = tensor(tokens(), [2, 4]);
  assert.deepStrictEqual(t.narrow(1, 1, 2).toArray(), new Uint16Array([1, 255, 65535, 7]));
  assert.deepStrictEqual(
    t.t().contiguous().toArray(),
    new Uint16Array([0, 50256, 1, 65535, 255, 7, 256, 8]),
  );
  assert.deepStrictEqual(t.view([8]).narrow(0, 5, 3).toArray(), new Uint16Array([65535, 7, 8]));
  assert.deepStrictEqual(t.clone().toArray(), tokens());
  assert.deepStrictEqual(
    cat([t.narrow(1, 3, 1), t.narrow(1, 0, 1)], 1).toArray(),
    new Uint16Array([256, 0, 8, 50256]),
  );
});

deviceTest("u16 converts to i32 and f32 on the device, views included", (device) => {
  const t = tensor(tokens(), [2, 4], { device });
  assert.equal(t.device, device);
  const wide = t.to("i32");
  assert.equal(wide.device, device);
  assert.deepStrictEqual(wide.toArray(), Int32Array.from(tokens()));
  assert.deepStrictEqual(t.narrow(1, 2, 2).to("i32").toArray(), new Int32Array([255, 256, 7, 8]));
  assert.deepStrictEqual(t.to("f32").toArray(), Float32Array.from(tokens()));
  assert.deepStrictEqual(t.to("cpu").toArray(), tokens());
  assert.deepStrictEqual(t.t().to("i32").to("cpu").tolist(), [[0, 50256], [1, 65535], [255, 7], [
    256,
    8,
  ]]);
});

/** Every op that computes, each on a u16 operand. */
function computingOps(u: Tensor): [string, () => unknown][] {
  const i = tensor(new Int32Array([1, 0, 1, 0, 1, 0, 1, 0]), [2, 4]);
  const mask = i.to("bool");
  return [
    ["add", () => u.add(u)],
    ["add", () => u.add(1)],
    ["add", () => i.add(u)],
    ["mul", () => u.mul(2)],
    ["div", () => u.div(2)],
    ["sub", () => u.sub(i)],
    ["floorDivide", () => u.floorDivide(2)],
    ["eq", () => eq(u, 1)],
    ["lt", () => u.lt(i)],
    ["sum", () => u.sum()],
    ["sum", () => u.sum(1)],
    ["exp", () => u.exp()],
    ["matmul", () => u.matmul(u.t())],
    ["softmax", () => F.softmax(u, -1)],
    ["gather", () => gather(u, 1, i)],
    ["indexSelect", () => indexSelect(u, 0, tensor(new Int32Array([1])))],
    ["where", () => where(mask, u, 0)],
    ["where", () => where(mask, 1, u)],
    ["maskedFill", () => maskedFill(u, mask, 3)],
    ["tril", () => u.tril()],
    ["fill_", () => u.clone().fill_(1)],
    ["add_", () => u.clone().add_(1)],
    ["mul_", () => u.clone().mul_(i)],
    ["full", () => full([2], 1, { dtype: "u16" })],
  ];
}

Deno.test('every op that computes refuses u16 by name, pointing at .to("i32")', () => {
  const u = tensor(tokens(), [2, 4]);
  for (const [op, call] of computingOps(u)) {
    assert.throws(
      call,
      (e: Error) =>
        e instanceof TypeError && e.message.startsWith(op) &&
        e.message.includes('u16 tensors are storage only; convert with .to("i32")'),
      `${op} did not refuse u16 by name`,
    );
  }
  assert.deepStrictEqual(u.toArray(), tokens(), "a refused op changed its operand");
});

Deno.test("ops that take i32 arguments name u16 when they get it", () => {
  const u = tensor(new Uint16Array([1, 0]), [2]);
  assert.throws(() => F.embedding(u, zeros([3, 2])), /embedding: indices must be i32, got u16/);
  assert.throws(() => F.crossEntropy(zeros([2, 3]), u), /crossEntropy: target must be i32 .*u16/);
  assert.throws(() => gather(zeros([2]), 0, u), /gather: index must be an i32 tensor, got u16/);
  assert.throws(
    () => u.requiresGrad_(),
    /only floating-point tensors \(f32, bf16, f16\) can require gradients, not u16/,
  );
});

Deno.test("nothing converts to u16, and a number outside [0, 65535] is not a u16", () => {
  assert.throws(
    () => tensor([1, 2], [2], { dtype: "i32" }).to("u16"),
    /to: i32 to u16 is not supported/,
  );
  assert.throws(
    () => tensor([70000], [1], { dtype: "u16" }),
    /value 70000 at index 0 is not a u16/,
  );
  assert.throws(() => tensor([-1], [1], { dtype: "u16" }), /value -1 at index 0 is not a u16/);
  assert.throws(() => tensor([1.5], [1], { dtype: "u16" }), /value 1.5 at index 0 is not a u16/);
});

Deno.test("i64 data converts to i32 when every value fits, and is refused with its index when not", () => {
  const t = tensor(new BigInt64Array([0n, -5n, 2147483647n, -2147483648n]));
  assert.equal(t.dtype, "i32");
  assert.deepStrictEqual(t.toArray(), new Int32Array([0, -5, 2147483647, -2147483648]));
  assert.throws(
    () => tensor(new BigInt64Array([1n, 2n ** 31n])),
    /BigInt64Array value 2147483648 at index 1 does not fit i32 \(dtrain has no i64; i64 data converts to i32 when every value fits\)/,
  );
  const i64 = "i64" as DType;
  const hint = /dtype "i64".*dtrain's integers are i32 \(pass dtype "i32"/;
  assert.throws(() => tensor([1], [1], { dtype: i64 }), hint);
  assert.throws(() => zeros([1], { dtype: i64 }), hint);
  assert.throws(() => tensor([1], [1]).to(i64), hint);
  assert.throws(
    () => zeros([1], { dtype: "f64" as DType }),
    /zeros: unknown dtype "f64" \(dtrain has f32, bf16, f16, i32, bool, u16\)$/,
  );
  // PyTorch's dtypes that dtrain lacks are refused by to() as dtypes, not looked up as devices;
  // PyTorch's names of dtrain's dtypes get dtrain's name as the hint.
  for (const name of ["float64", "int8"]) {
    assert.throws(
      () => tensor([1], [1]).to(name as DType),
      new RegExp(`to: unknown dtype "${name}" \\(dtrain has f32, bf16, f16, i32, bool, u16\\)$`),
    );
  }
  for (const [name, short] of [["bfloat16", "bf16"], ["half", "f16"], ["float16", "f16"]]) {
    assert.throws(
      () => tensor([1], [1]).to(name as DType),
      new RegExp(`to: unknown dtype "${name}" .*; dtrain calls PyTorch's ${name} "${short}"$`),
    );
  }
});

Deno.test("a TensorDataset of u16 rows gathers 2-byte rows", () => {
  const rows = tensor(new Uint16Array([10, 11, 20, 21, 30, 31]), [3, 2]);
  const picked = gatherRows(rows, new Int32Array([2, 0]));
  assert.equal(picked.dtype, "u16");
  assert.deepStrictEqual(picked.toArray(), new Uint16Array([30, 31, 10, 11]));
});
