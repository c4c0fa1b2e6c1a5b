// linear on bf16 operands takes the bf16 product kernel (ops/linear_bf16.ts): its values and
// gradients are the f32 path's on the same bf16 values, rounded once: bit for bit where the
// kernel's engine is f32-sgemm (a CPU without avx512_bf16, and the emulated accelerator there), within one
// bf16 rounding where it is oneDNN's (its f32 sums run in another order); its graph keeps no f32
// copy of the weight; and under autocast it is what an f32 model's linear runs.
import assert from "node:assert/strict";
import { autocast, F, manualSeed, randn, type Tensor, tidy } from "../../mod.ts";
import { bf16MatmulBackend } from "../../src/tensor/device/bf16_gemm.ts";
import { allocatedBytes } from "../../src/tensor/storage.ts";
import { deviceTest } from "../_harness/devices.ts";

const bits = (t: Tensor) => Array.from(t.view("u16").toArray());

/**
 * Asserts `got` equals `want` bit for bit on the f32-sgemm engine, and on oneDNN's within one bf16
 * step (2^-7 relative: the two f32 sums round apart only at a rounding boundary) plus 1e-5·√k
 * absolute for sums that cancel to near zero, where the f32 order matters most.
 */
function assertProduct(got: Tensor, want: Tensor, k: number, what: string) {
  // The emulated accelerator runs the CPU's kernels, so it has the CPU's engine too.
  if (bf16MatmulBackend().name === "f32-sgemm") {
    assert.deepEqual(bits(got), bits(want), what);
    return;
  }
  const [g, w] = [got.toArray(), want.toArray()];
  for (let i = 0; i < w.length; i++) {
    const allowed = 2 ** -7 * Math.abs(w[i]) + 1e-5 * Math.sqrt(k);
    assert.ok(Math.abs(g[i] - w[i]) <= allowed, `${what}: [${i}] ${g[i]} vs ${w[i]}`);
  }
}

/** The generic path: f32 copies of the bf16 values, the f32 linear, one rounding. */
function viaF32(x: Tensor, w: Tensor, b: Tensor | null): Tensor {
  return F.linear(x.float(), w.float(), b?.float()).bfloat16();
}

function check(device: string, shape: number[], inF: number, outF: number, withBias: boolean) {
  tidy(() => {
    manualSeed(inF * 31 + outF);
    const leaf = (s: number[]) => randn(s, { device }).bfloat16().requiresGrad_();
    const x = leaf([...shape, inF]), w = leaf([outF, inF]), b = withBias ? leaf([outF]) : null;
    const x2 = x.detach().requiresGrad_(), w2 = w.detach().requiresGrad_();
    const b2 = b ? b.detach().requiresGrad_() : null;
    const y = F.linear(x, w, b), want = viaF32(x2, w2, b2);
    assert.equal(y.dtype, "bf16");
    assert.deepEqual(y.shape, want.shape);
    assertProduct(y, want, inF, `values, ${shape} x ${inF} -> ${outF}`);
    const g = randn(y.shape, { device }).bfloat16();
    y.backward(g);
    want.backward(g);
    for (const [got, ref, name] of [[x, x2, "x"], [w, w2, "weight"], [b, b2, "bias"]] as const) {
      if (got === null || ref === null) continue;
      assert.equal(got.grad?.dtype, "bf16", name);
      assert.deepEqual(got.grad!.shape, got.shape, name);
      // The generic path's gradient is rounded from f32 too: the same bits (on f32-sgemm). The
      // weight's sums run over every row of x, the input's over outF.
      const k = name === "x" ? outF : x.numel() / inF;
      assertProduct(got.grad!, ref.grad!, k, `${name}'s gradient`);
    }
  });
}

for (const device of ["cpu", "emu:0"]) {
  Deno.test(`linear on bf16 equals the f32 path on the bf16 values, bit for bit (${device})`, () => {
    check(device, [5], 7, 3, true);
    check(device, [2, 9], 64, 48, true);
    check(device, [130], 33, 65, false);
    check(device, [4, 32], 384, 96, true);
  });
}

Deno.test("a bf16 linear's graph keeps no f32 copy of the weight", () => {
  tidy(() => {
    const w = randn([512, 512]).bfloat16().requiresGrad_();
    const x = randn([4, 512]).bfloat16();
    const before = allocatedBytes();
    const y = F.linear(x, w);
    const held = allocatedBytes() - before;
    // The output (4 x 512 bf16) and a contiguous view at most; an f32 weight copy is 1 MiB.
    assert.ok(held < 512 * 512 * 4 / 4, `the forward holds ${held} bytes`);
    y.sum().backward();
    assert.equal(w.grad?.dtype, "bf16");
  });
});

deviceTest("under autocast an f32 model's linear runs in bf16 with f32 gradients", (device) => {
  tidy(() => {
    manualSeed(5);
    const w = randn([24, 40], { device }).requiresGrad_();
    const b = randn([24], { device }).requiresGrad_();
    const x = randn([6, 40], { device });
    const deviceType = device.startsWith("cuda") ? "cuda" : "emu";
    const y = autocast({ deviceType, dtype: "bf16" }, () => F.linear(x, w, b));
    assert.equal(y.dtype, "bf16");
    assert.deepEqual(bits(y), bits(viaF32(x.bfloat16(), w.bfloat16(), b.bfloat16())));
    y.float().sum().backward();
    assert.equal(w.grad?.dtype, "f32");
    assert.equal(b.grad?.dtype, "f32");
  });
});
