/**
 * bf16 matrix products on the CPU: the `matmulBf16` kernel (oneDNN, or f32 sgemm of converted
 * panels: `bf16MatmulBackend()`) against what a bf16 matmul costs without it, upcasting both
 * operands to f32 (`castHalfF32` into buffers allocated once) and running the existing sgemm
 * (`matmul`). The products are a GPT MLP layer's at batch x block = 64 rows, width 384, hidden 1536
 * (the forward and both gradients, as matmul's forward and backward call the kernel) and an
 * attention block's batched scores. Prints a table of medians (the two alternating call by call) and the ratios (upcast / kernel; above
 * 1 the kernel is faster) and a `BENCH_RESULT` JSON line. Where a Python with torch is found
 * (`DTRAIN_BENCH_PYTHON`, else python3), the same products run through PyTorch's bf16
 * `torch.matmul` right after (bench/bf16_matmul_torch.py, same thread count), with the ratio
 * PyTorch / kernel (above 1 dtrain is faster).
 *
 * Usage: deno run -A --v8-flags=--expose-gc bench/bf16_matmul.ts [--reps=200] [--threads=N]
 * @module
 */

import { DTypeCode } from "../ffi/dtrain.ts";
import { getDevice, getNumThreads, manualSeed, randn, setNumThreads, type Tensor } from "../mod.ts";
import { bf16MatmulBackend } from "../src/tensor/device/bf16_gemm.ts";
import { findTorch, machineInfo } from "./runner.ts";
import { argValue } from "./workload.ts";

/** One kernel call's shape: `batch` products op(a) [m, k] @ op(b) [k, n]. */
interface Product {
  name: string;
  batch: number;
  m: number;
  n: number;
  k: number;
  transA: 0 | 1;
  transB: 0 | 1;
}

// deno-fmt-ignore
const PRODUCTS: Product[] = [
  { name: "MLP forward x @ W^T, 64x384 @ 384x1536", batch: 1, m: 64, n: 1536, k: 384, transA: 0, transB: 1 },
  { name: "MLP dX = dY @ W, 64x1536 @ 1536x384", batch: 1, m: 64, n: 384, k: 1536, transA: 0, transB: 0 },
  { name: "MLP dW = dY^T @ X, 1536x64 @ 64x384", batch: 1, m: 1536, n: 384, k: 64, transA: 1, transB: 0 },
  { name: "attention scores, 32 x (128x64 @ 64x128)", batch: 32, m: 128, n: 128, k: 64, transA: 0, transB: 1 },
];

const dev = getDevice("cpu");

/** Median milliseconds of each of `fns` over `reps` calls, after 3 warm-up calls each. The calls
 * alternate one by one (A B A B ...), so that a change in the machine's load hits all alike. */
function medianMs(fns: (() => void)[], reps: number): number[] {
  for (let i = 0; i < 3; i++) fns.forEach((fn) => fn());
  const times = fns.map(() => [] as number[]);
  for (let i = 0; i < reps; i++) {
    fns.forEach((fn, f) => {
      const start = performance.now();
      fn();
      times[f].push(performance.now() - start);
    });
  }
  return times.map((t) => t.sort((x, y) => x - y)[Math.floor(t.length / 2)]);
}

/** The kernel's and the upcast path's median times for one product. */
function measure(p: Product, reps: number): { kernelMs: number; upcastMs: number } {
  const na = p.batch * p.m * p.k, nb = p.batch * p.k * p.n;
  const a: Tensor = randn([na]).to("bf16"), b: Tensor = randn([nb]).to("bf16");
  const c = randn([p.batch * p.m * p.n]);
  const fa = randn([na]), fb = randn([nb]); // the upcast path's buffers, allocated once
  const lda = p.transA ? p.m : p.k, ldb = p.transB ? p.k : p.n;
  const sa = p.m * p.k, sb = p.k * p.n, sc = p.m * p.n;
  const args = [p.batch, sa, sb, sc, p.m, p.n, p.k, p.transA, p.transB] as const;
  const kernel = () =>
    dev.check(dev.kernels.matmulBf16(a.ptr, b.ptr, c.ptr, ...args, lda, ldb, p.n, 1, 0));
  const upcast = () => {
    dev.check(dev.kernels.castHalfF32(a.ptr, DTypeCode.bf16, fa.ptr, na));
    dev.check(dev.kernels.castHalfF32(b.ptr, DTypeCode.bf16, fb.ptr, nb));
    dev.check(dev.kernels.matmulBatched(fa.ptr, fb.ptr, c.ptr, ...args, 1, 0));
  };
  const [kernelMs, upcastMs] = medianMs([kernel, upcast], reps);
  return { kernelMs, upcastMs };
}

if (import.meta.main) {
  const reps = Number(argValue(Deno.args, "reps", "200"));
  const threads = argValue(Deno.args, "threads", "");
  if (threads !== "") setNumThreads(Number(threads));
  manualSeed(22);
  const backend = bf16MatmulBackend();
  const machine = machineInfo();
  console.log(
    `bf16 matmul bench: ${machine.cpu}, OpenBLAS core ${machine.blasCore}, ${getNumThreads()} ` +
      `threads\nbf16 matmul: ${backend.name} (${backend.reason})`,
  );
  const measured = PRODUCTS.map((p) => ({ ...p, ...measure(p, reps) }));
  const torchMs = await torchTimes(reps, getNumThreads());
  const rows = measured.map((r, i) => ({ ...r, torchMs: torchMs?.[i] ?? null }));
  const width = Math.max(...rows.map((r) => r.name.length));
  const line = (...cells: string[]) => console.log(cells.join(" | "));
  const ratio = (x: number | null, y: number) => x === null ? "n/a" : `${(x / y).toFixed(2)}x`;
  line(
    "product".padEnd(width),
    "kernel ms",
    "upcast+sgemm ms",
    "upcast / kernel",
    "torch ms",
    "torch / kernel",
  );
  line(...[width, 9, 15, 15, 8, 14].map((n) => "-".repeat(n)));
  for (const r of rows) {
    line(
      r.name.padEnd(width),
      r.kernelMs.toFixed(3).padStart(9),
      r.upcastMs.toFixed(3).padStart(15),
      ratio(r.upcastMs, r.kernelMs).padStart(15),
      (r.torchMs?.toFixed(3) ?? "n/a").padStart(8),
      ratio(r.torchMs, r.kernelMs).padStart(14),
    );
  }
  console.log(`BENCH_RESULT ${JSON.stringify({ backend, threads: getNumThreads(), rows })}`);
}

/** PyTorch's median milliseconds of each product, or null (saying why) without torch. */
async function torchTimes(reps: number, threads: number): Promise<number[] | null> {
  const torch = await findTorch();
  if ("error" in torch) {
    console.log(`torch: not compared (${torch.python}: ${torch.error})`);
    return null;
  }
  const script = new URL("./bf16_matmul_torch.py", import.meta.url).pathname;
  const args = [script, JSON.stringify(PRODUCTS), String(reps), String(threads)];
  const out = await new Deno.Command(torch.python, { args, stderr: "inherit" }).output();
  const line = new TextDecoder().decode(out.stdout).split("\n").find((l) =>
    l.startsWith("BENCH_RESULT ")
  );
  if (!out.success || line === undefined) throw new Error("bench/bf16_matmul_torch.py failed");
  const result = JSON.parse(line.slice("BENCH_RESULT ".length)) as { rows: { torchMs: number }[] };
  console.log(`torch ${torch.version}`);
  return result.rows.map((r) => r.torchMs);
}
