/**
 * Which engine multiplies bf16 matrices on the CPU (the `matmulBf16` kernel, csrc/core/matmul_bf16.c)
 * and why: oneDNN's matmul where the CPU has avx512_bf16 or amx_bf16 and libdnnl.so.2 (oneDNN 2.x)
 * loads and passes a probe product, else f32 sgemm of the bf16 values. libdtrain chooses once, on
 * first use; `DTRAIN_BF16_GEMM=auto|onednn|f32` forces a choice.
 * @module
 */

import { loadDtrain } from "../../../ffi/dtrain.ts";

/** The engine of the CPU's bf16 products, and why it was chosen. */
export interface Bf16MatmulBackend {
  /** `"onednn"`: oneDNN's bf16 matmul; `"f32-sgemm"`: OpenBLAS's sgemm of the f32 values. */
  readonly name: "onednn" | "f32-sgemm";
  /** Why: the library and implementation, or what ruled oneDNN out (no avx512_bf16, ...). */
  readonly reason: string;
}

/**
 * The engine libdtrain multiplies bf16 matrices with on the CPU (the emu device runs the same), for
 * reports such as `make bench`'s.
 *
 * @returns The engine's name and the reason.
 * @throws Error with libdtrain's reason when `DTRAIN_BF16_GEMM` forces an engine that cannot run
 *   here (oneDNN on a CPU without bf16 instructions, or without libdnnl.so.2), or is not a known
 *   value; bf16 products fail with the same message.
 *
 * @example Ask
 * ```ts
 * import { bf16MatmulBackend } from "./bf16_gemm.ts";
 * const { name, reason } = bf16MatmulBackend();
 * console.log(`bf16 matmul: ${name} (${reason})`);
 * ```
 */
export function bf16MatmulBackend(): Bf16MatmulBackend {
  const buf = new Uint8Array(512);
  const code = loadDtrain().dt_matmul_bf16_backend(buf, buf.length);
  const end = buf.indexOf(0);
  const reason = new TextDecoder().decode(buf.subarray(0, end < 0 ? buf.length : end));
  if (code === 1) return { name: "onednn", reason };
  if (code === 0) return { name: "f32-sgemm", reason };
  throw new Error(`bf16 matmul: ${reason}`);
}
