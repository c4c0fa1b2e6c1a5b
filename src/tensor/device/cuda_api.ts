/**
 * `cuda`: what PyTorch's `torch.cuda` says about the GPUs (availability with its reason, count,
 * synchronisation) and the precision of matrix products on them. Exported from mod.ts as `cuda`.
 * @module
 */

import { MatmulPrecision } from "../../../ffi/cuda.ts";
import { checkCuda, cudaIndex, probeCuda, requireCuda, useCudaDevice } from "./cuda_runtime.ts";

/**
 * Whether tensors can live on `"cuda"`: the CUDA library was built, a driver is installed and a
 * GPU is visible. Never throws; {@linkcode unavailableReason} says what is missing.
 *
 * @returns True when at least one GPU is usable.
 * @example On a machine without a GPU
 * ```ts
 * import assert from "node:assert/strict";
 * import { cuda } from "../../../mod.ts";
 * assert.equal(cuda.isAvailable(), cuda.unavailableReason() === "");
 * ```
 */
export function isAvailable(): boolean {
  return probeCuda().reason === "";
}

/**
 * Why CUDA is unavailable: the library was not built (no nvcc), there is no NVIDIA driver, or no
 * GPU; `""` when it is available.
 *
 * @returns The reason, in a sentence.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { cuda } from "../../../mod.ts";
 * if (!cuda.isAvailable()) assert.match(cuda.unavailableReason(), /CUDA|driver|GPU|device/);
 * ```
 */
export function unavailableReason(): string {
  return probeCuda().reason;
}

/**
 * How many GPUs this process sees (0 when CUDA is unavailable).
 *
 * @returns The count.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { cuda } from "../../../mod.ts";
 * assert.equal(cuda.deviceCount() > 0, cuda.isAvailable());
 * ```
 */
export function deviceCount(): number {
  return probeCuda().count;
}

/**
 * Waits until every kernel and copy queued on the GPU has finished, and reports an error a
 * kernel found on the GPU since the last synchronisation (an index out of range).
 *
 * @param device The GPU (default `cuda:0`).
 * @throws Error with the reason when CUDA is unavailable; the device's error otherwise.
 */
export function synchronize(device: number | string = 0): void {
  const lib = requireCuda("cuda.synchronize: CUDA");
  useCudaDevice(lib, cudaIndex(device, "cuda"));
  checkCuda(lib, lib.dt_cuda_synchronize());
}

/**
 * The GPU's name, compute capability and memory, e.g. `"NVIDIA H200 (sm_90, 140 GiB)"`.
 *
 * @param device The GPU (default `cuda:0`).
 * @returns The description.
 * @throws Error with the reason when CUDA is unavailable.
 */
export function getDeviceName(device: number | string = 0): string {
  const lib = requireCuda("cuda.getDeviceName: CUDA");
  const buf = new Uint8Array(256);
  checkCuda(lib, lib.dt_cuda_device_name(cudaIndex(device, "cuda"), buf, buf.length));
  return new TextDecoder().decode(buf.subarray(0, buf.indexOf(0)));
}

/** PyTorch's names for the precision of f32 matrix products (`torch.set_float32_matmul_precision`). */
export type MatmulPrecisionName = "highest" | "high" | "medium";

const PRECISIONS: Record<MatmulPrecisionName, number> = {
  highest: MatmulPrecision.f32,
  high: MatmulPrecision.tf32,
  medium: MatmulPrecision.bf16,
};

/**
 * Sets the precision of matrix products and attention on every GPU: `"highest"` (f32, the
 * default), `"high"` (TF32 tensor cores) or `"medium"` (operands rounded to bf16, f32
 * accumulation and result: mixed precision with f32 master weights and gradients). See
 * [Note: matmul precision] in csrc/cuda/matmul.cu.
 *
 * @param precision The precision.
 * @throws RangeError for another name; Error when CUDA is unavailable.
 */
export function setMatmulPrecision(precision: MatmulPrecisionName): void {
  const mode = PRECISIONS[precision];
  if (mode === undefined) {
    throw new RangeError(
      `cuda.setMatmulPrecision: "${precision}" is not one of "highest", "high", "medium"`,
    );
  }
  const lib = requireCuda("cuda.setMatmulPrecision: CUDA");
  checkCuda(lib, lib.dt_cuda_set_matmul_precision(mode));
}

/**
 * The precision of matrix products on the GPUs (see {@linkcode setMatmulPrecision}).
 *
 * @returns The precision's name.
 * @throws Error when CUDA is unavailable.
 */
export function getMatmulPrecision(): MatmulPrecisionName {
  const mode = requireCuda("cuda.getMatmulPrecision: CUDA").dt_cuda_get_matmul_precision();
  const names = Object.keys(PRECISIONS) as MatmulPrecisionName[];
  return names.find((name) => PRECISIONS[name] === mode) ?? "highest";
}
