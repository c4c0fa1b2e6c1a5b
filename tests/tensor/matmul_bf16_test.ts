// The bf16 product kernel (matmulBf16, csrc/core/matmul_bf16.c) through the device seam on cpu,
// emu and (where a GPU is) cuda, against dt_matmul's sgemm of the operands' f32 values: bit for bit
// on the f32-sgemm engine (its blocks are dt_matmul's), within 1e-6 of the largest value on
// oneDNN's, 1e-5 on cuBLAS's. The choice of engine and the errors of a forced engine that cannot
// run are checked in child processes (libdtrain chooses once per process).

import assert from "node:assert/strict";
import { type Device, getDevice, manualSeed, randn, type Tensor, zeros } from "../../mod.ts";
import { bf16MatmulBackend } from "../../src/tensor/device/bf16_gemm.ts";
import { gpuTest } from "../_harness/devices.ts";

const cpuFlags = new Set(
  /^flags\s*:(.*)$/m.exec(Deno.readTextFileSync("/proc/cpuinfo"))?.[1].trim().split(/\s+/) ?? [],
);
const cpuHasBf16 = cpuFlags.has("avx512_bf16") || cpuFlags.has("amx_bf16");
const onednnLoads = (() => {
  try {
    Deno.dlopen("libdnnl.so.2", {}).close();
    return true;
  } catch {
    return false;
  }
})();

/** One call of the kernel: `batch` products op(a_i) [m, k] @ op(b_i) [k, n] into c [m, ldc]. */
interface Case {
  batch: number;
  m: number;
  n: number;
  k: number;
  transA?: boolean;
  transB?: boolean;
  /** Extra elements at the end of each row of a, b and c (leading dimensions beyond the minimum). */
  pad?: number;
  /** Repeat one b for every product (stride 0). */
  shareB?: boolean;
  alpha?: number;
  beta?: number;
}

/** Random values rounded to bf16: the bf16 tensor and its exact f32 copy. */
function bf16Values(n: number, device: Device): [Tensor, Tensor] {
  const half = randn([Math.max(n, 1)], { device }).to("bf16");
  return [half, half.to("f32")];
}

const offset = (p: Deno.PointerValue, bytes: number) => Deno.UnsafePointer.offset(p!, bytes);

/** The kernel's result and dt_matmul's on the f32 values, as arrays. */
function run(device: Device, c: Case): { got: Float32Array; want: Float32Array } {
  const pad = c.pad ?? 0, alpha = c.alpha ?? 1, beta = c.beta ?? 0;
  const ta = c.transA ?? false, tb = c.transB ?? false;
  const ld = (cols: number) => Math.max(cols + pad, 1); // at least 1, as BLAS requires
  const lda = ld(ta ? c.m : c.k), ldb = ld(tb ? c.k : c.n), ldc = ld(c.n);
  const strideA = (ta ? c.k : c.m) * lda, strideB = c.shareB ? 0 : (tb ? c.n : c.k) * ldb;
  const strideC = c.m * ldc;
  const [a, af] = bf16Values(c.batch * strideA, device);
  const [b, bf] = bf16Values(c.shareB ? (tb ? c.n : c.k) * ldb : c.batch * strideB, device);
  const start = randn([Math.max(c.batch * strideC, 1)], { device });
  const got = start.clone(), want = start.clone();
  const dev = got.storage.backend;
  // deno-fmt-ignore
  dev.check(dev.kernels.matmulBf16(
    a.ptr, b.ptr, got.ptr, c.batch, strideA, strideB, strideC, c.m, c.n, c.k, ta ? 1 : 0,
    tb ? 1 : 0, lda, ldb, ldc, alpha, beta,
  ));
  for (let i = 0; i < c.batch; i++) {
    dev.check(
      dev.kernels.matmul(
        offset(af.ptr, 4 * i * strideA),
        offset(bf.ptr, 4 * i * strideB),
        offset(want.ptr, 4 * i * strideC),
        c.m,
        c.n,
        c.k,
        ta ? 1 : 0,
        tb ? 1 : 0,
        lda,
        ldb,
        ldc,
        alpha,
        beta,
      ),
    );
  }
  return { got: got.toArray() as Float32Array, want: want.toArray() as Float32Array };
}

/**
 * Asserts the engine's agreement with sgemm: exact on f32-sgemm, within 1e-6 of the largest value
 * on oneDNN and 1e-5 on cuBLAS (tensor cores sum in their own order, and so may cuBLAS's sgemm).
 */
function assertMatches(device: Device, got: Float32Array, want: Float32Array, what: string): void {
  if (device !== "cuda" && bf16MatmulBackend().name === "f32-sgemm") {
    const at = got.findIndex((v, i) => !Object.is(v, want[i]));
    assert.equal(at, -1, `${what}: ${got[at]} at ${at}, sgemm gives ${want[at]}`);
    return;
  }
  const scale = want.reduce((s, v) => Math.max(s, Math.abs(v)), 1e-30);
  const worst = got.reduce((s, v, i) => Math.max(s, Math.abs(v - want[i])), 0) / scale;
  assert.ok(worst <= (device === "cuda" ? 1e-5 : 1e-6), `${what}: relative error ${worst}`);
}

const CASES: [string, Case][] = [
  ["GPT forward 64x384 @ 384x1536", { batch: 1, m: 64, n: 1536, k: 384 }],
  ["dA = dC @ B^T, odd sizes", { batch: 1, m: 45, n: 70, k: 33, transB: true }],
  ["dB = A^T @ dC, odd sizes", { batch: 1, m: 37, n: 29, k: 53, transA: true }],
  ["both transposed, padded rows, alpha 2 and beta 0.5", {
    batch: 1,
    m: 19,
    n: 23,
    k: 41,
    transA: true,
    transB: true,
    pad: 3,
    alpha: 2,
    beta: 0.5,
  }],
  ["a batch of 3 sharing b", { batch: 3, m: 17, n: 130, k: 21, shareB: true, transA: true }],
  ["attention-like batch", { batch: 4, m: 128, n: 128, k: 64, transB: true }],
  // b's 260 columns x 4096 rows exceed a block's scratch: converted in chunks of 256 columns.
  ["a shared operand converted in chunks", { batch: 1, m: 270, n: 260, k: 4096 }],
  ["k = 0 scales c by beta", { batch: 2, m: 5, n: 6, k: 0, beta: 0.25 }],
  ["m = 0 writes nothing", { batch: 2, m: 0, n: 6, k: 3 }],
];

for (const device of ["cpu", "emu", "cuda"] as const) {
  for (const [name, c] of CASES) {
    const test = device === "cuda" ? gpuTest : Deno.test;
    test(`matmulBf16 on ${device}: ${name} equals sgemm of the bf16 values`, () => {
      manualSeed(22);
      const { got, want } = run(device, c);
      assertMatches(device, got, want, name);
    });
  }
}

Deno.test("matmulBf16 refuses a leading dimension smaller than its rows, naming it", () => {
  const a = zeros([12], { dtype: "bf16" }), c = zeros([12]);
  const dev = getDevice("cpu");
  assert.throws(
    () =>
      dev.check(
        dev.kernels.matmulBf16(a.ptr, a.ptr, c.ptr, 1, 0, 0, 0, 3, 4, 3, 0, 0, 2, 4, 4, 1, 0),
      ),
    /dt_matmul_bf16: lda 2 too small/,
  );
});

/** Runs `code` (importing mod.ts as `dt` and the query as `q`) in a child with DTRAIN_BF16_GEMM. */
async function child(mode: string, code: string): Promise<{ ok: boolean; out: string }> {
  const root = new URL("../../", import.meta.url).href;
  const script = `import * as dt from "${root}mod.ts";
import * as q from "${root}src/tensor/device/bf16_gemm.ts";
${code}`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--no-check", script],
    env: { DTRAIN_BF16_GEMM: mode, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { ok: out.success, out: text };
}

// A bf16 product of [1, 2] @ [3, 4]^T, through the kernel: prints its value or the error.
const PRODUCT = `const a = dt.tensor([1, 2]).to("bf16"), b = dt.tensor([3, 4]).to("bf16");
const c = dt.zeros([1]), dev = dt.getDevice("cpu");
try {
  dev.check(dev.kernels.matmulBf16(a.ptr, b.ptr, c.ptr, 1, 0, 0, 0, 1, 1, 2, 0, 1, 2, 2, 1, 1, 0));
  console.log("product", c.item());
} catch (e) { console.log("product error:", e.message); }
try { console.log("backend", JSON.stringify(q.bf16MatmulBackend())); }
catch (e) { console.log("backend error:", e.message); }`;

Deno.test("DTRAIN_BF16_GEMM=f32 forces the f32 sgemm engine, and says so", async () => {
  const { ok, out } = await child("f32", PRODUCT);
  assert.ok(ok, out);
  assert.match(out, /^product 11$/m);
  assert.match(out, /backend \{"name":"f32-sgemm","reason":"[^"]*DTRAIN_BF16_GEMM=f32"\}/);
});

Deno.test("an unknown DTRAIN_BF16_GEMM fails the products and the query, naming the choices", async () => {
  const { out } = await child("mkl", PRODUCT);
  assert.match(
    out,
    /product error: dt_matmul_bf16: DTRAIN_BF16_GEMM=mkl is not one of auto, onednn, f32/,
  );
  assert.match(
    out,
    /backend error: bf16 matmul: DTRAIN_BF16_GEMM=mkl is not one of auto, onednn, f32/,
  );
});

Deno.test({
  name: "DTRAIN_BF16_GEMM=onednn on a CPU without bf16 instructions fails, saying why" +
    (cpuHasBf16 ? " [skipped: this CPU has avx512_bf16 or amx_bf16]" : ""),
  ignore: cpuHasBf16,
  fn: async () => {
    const { out } = await child("onednn", PRODUCT);
    const why = "DTRAIN_BF16_GEMM=onednn, but oneDNN cannot run: the CPU has neither avx512_bf16 " +
      "nor amx_bf16 instructions";
    assert.ok(out.includes(`product error: dt_matmul_bf16: ${why}`), out);
    assert.ok(out.includes(`backend error: bf16 matmul: ${why}`), out);
  },
});

Deno.test("auto picks oneDNN where the CPU has bf16 instructions and oneDNN loads, else sgemm, saying why", async () => {
  // In a child: this process's choice may have been forced by DTRAIN_BF16_GEMM.
  const { ok, out } = await child("auto", PRODUCT);
  assert.ok(ok, out);
  assert.match(out, /^product 11$/m);
  if (!cpuHasBf16) {
    assert.match(out, /"name":"f32-sgemm","reason":"[^"]*neither avx512_bf16 nor amx_bf16/);
  } else if (!onednnLoads) {
    assert.match(
      out,
      /"name":"f32-sgemm","reason":"[^"]*libdnnl\.so\.2 \(oneDNN 2\.x\) does not load/,
    );
  } else {
    assert.match(out, /"name":"onednn"/);
  }
});

const onednnSkip = !cpuHasBf16
  ? "this CPU has neither avx512_bf16 nor amx_bf16"
  : !onednnLoads
  ? "libdnnl.so.2 does not load"
  : "";
Deno.test({
  name: "DTRAIN_BF16_GEMM=onednn runs oneDNN's bf16 matmul within 1e-6 of sgemm" +
    (onednnSkip ? ` [skipped: ${onednnSkip}]` : ""),
  ignore: onednnSkip !== "",
  fn: async () => {
    const { ok, out } = await child("onednn", PRODUCT);
    assert.ok(ok, out);
    assert.match(out, /^product 11$/m);
    assert.match(out, /backend \{"name":"onednn","reason":"oneDNN 2\./);
  },
});
