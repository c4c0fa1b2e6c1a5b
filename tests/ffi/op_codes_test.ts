// Every elementwise op code of ffi/dtrain.ts through each device's kernels, and the code after the
// last refused. A binary or unary op added to the enum and to BinaryOp or UnaryOp is known to
// every kernel at once (dt_binary_known, dt_unary_known in csrc/core/scalar_math.h); an op whose
// formula, gradient or integer form is missing gives NaN (INT32_MIN on i32) here, though the
// header's switches already refuse it at compile time. The inputs are ones where every op is
// finite.
import assert from "node:assert/strict";
import { cuda, type Tensor, tensor, zeros } from "../../mod.ts";
import { BinaryOp, Status, UnaryOp } from "../../ffi/dtrain.ts";

const devices = ["cpu", "cuda:0"] as const;
const N = 4;

/** The first code past the enum's last member. */
const pastLast = (codes: Record<string, number>) => Math.max(...Object.values(codes)) + 1;

const f32 = (device: string, values: number[]) => tensor(values).to(device);
const i32 = (device: string, values: number[]) => tensor(values, [N], { dtype: "i32" }).to(device);
const kernelsOf = (t: Tensor) => t.storage.backend.kernels;
const valuesOf = (t: Tensor) => Array.from(t.toArray() as ArrayLike<number>);

function assertFinite(values: number[], what: string): void {
  assert.ok(values.every(Number.isFinite), `${what}: ${values.join(", ")}`);
}

for (const device of devices) {
  const ignore = device !== "cpu" && !cuda.isAvailable();

  Deno.test({
    name: `every BinaryOp code runs on ${device}'s f32 and i32 kernels and their gradients`,
    ignore,
    fn() {
      const a = f32(device, [7, -7, 9, 0.5]), b = f32(device, [2, 2, -4, 0.25]);
      const scalar = f32(device, [2]), gy = f32(device, [1, 1, 1, 1]);
      const ai = i32(device, [7, -7, 9, 0]), bi = i32(device, [2, 2, -4, 5]);
      const af = ai.to("f32"), bf = bi.to("f32");
      const k = kernelsOf(a);
      for (const [name, code] of Object.entries(BinaryOp)) {
        const out = zeros([N]).to(device), broadcast = zeros([N]).to(device);
        assert.equal(k.binary(code, a.ptr, N, b.ptr, N, out.ptr, N), Status.OK, name);
        assert.equal(k.binary(code, a.ptr, N, scalar.ptr, 1, broadcast.ptr, N), Status.OK, name);
        assertFinite(valuesOf(out), `${name}(a, b)`);
        assertFinite(valuesOf(broadcast), `${name}(a, 2)`);

        const ga = zeros([N]).to(device), gb = zeros([N]).to(device);
        const backward = k.binaryBackward(code, a.ptr, N, b.ptr, N, gy.ptr, N, ga.ptr, gb.ptr);
        assert.equal(backward, Status.OK, name);
        assertFinite([...valuesOf(ga), ...valuesOf(gb)], `${name}'s gradients`);

        // On these integers each op's i32 form is its f32 form rounded down (div: floor division).
        const floats = zeros([N]).to(device), ints = i32(device, [0, 0, 0, 0]);
        assert.equal(k.binary(code, af.ptr, N, bf.ptr, N, floats.ptr, N), Status.OK, name);
        assert.equal(k.binaryI32(code, ai.ptr, N, bi.ptr, N, ints.ptr, N), Status.OK, name);
        assert.deepEqual(valuesOf(ints), valuesOf(floats).map(Math.floor), `${name} on i32`);
      }
      const out = zeros([N]).to(device), outI = i32(device, [0, 0, 0, 0]);
      for (const code of [pastLast(BinaryOp), -1]) {
        assert.equal(k.binary(code, a.ptr, N, b.ptr, N, out.ptr, N), Status.EINVAL, `${code}`);
        assert.equal(
          k.binaryBackward(code, a.ptr, N, b.ptr, N, gy.ptr, N, out.ptr, null),
          Status.EINVAL,
        );
        assert.equal(k.binaryI32(code, ai.ptr, N, bi.ptr, N, outI.ptr, N), Status.EINVAL);
      }
    },
  });

  Deno.test({
    name: `every UnaryOp code runs on ${device}'s kernels and says what its backward reads`,
    ignore,
    fn() {
      const x = f32(device, [0.5, 1, 2, 3]), gy = f32(device, [1, 1, 1, 1]);
      const k = kernelsOf(x);
      for (const [name, code] of Object.entries(UnaryOp)) {
        const y = zeros([N]).to(device), gx = zeros([N]).to(device);
        assert.equal(k.unary(code, x.ptr, y.ptr, N, 2), Status.OK, name);
        assertFinite(valuesOf(y), name);
        assert.ok([0, 1, 2].includes(k.unaryReads(code)), `${name} reads ${k.unaryReads(code)}`);
        assert.equal(k.unaryBackward(code, x.ptr, y.ptr, gy.ptr, gx.ptr, N, 2), Status.OK, name);
        assertFinite(valuesOf(gx), `${name}'s gradient`);
      }
      const y = zeros([N]).to(device);
      for (const code of [pastLast(UnaryOp), -1]) {
        assert.equal(k.unary(code, x.ptr, y.ptr, N, 2), Status.EINVAL, `${code}`);
        assert.equal(k.unaryBackward(code, x.ptr, y.ptr, gy.ptr, y.ptr, N, 2), Status.EINVAL);
        assert.equal(k.unaryReads(code), -1);
      }
    },
  });
}
