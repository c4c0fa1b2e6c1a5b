/**
 * The accelerators the device tests run on, decided once for every folder of tests/ (a test of a
 * concept on a device sits beside the concept, named for the device: tests/nn/gpt_cuda_test.ts).
 * The GPU tests need a GPU, its driver and build/libdtrain_cuda.so: each is declared with
 * {@linkcode gpuTest}, which marks it ignored where they are missing and puts the reason in its
 * name, so a skipped test says why. A test of the device contract (not of a kernel's speed) is
 * declared once with {@linkcode deviceTest} and runs on every accelerator: on the emulated one
 * (`emu`, always, so it runs in CPU CI) and on cuda where a GPU is.
 * @module
 */

import { cuda, emu } from "../../mod.ts";
import type { TensorLike } from "../../src/distributed/backend.ts";

/** True when a GPU is usable. */
export const hasGpu: boolean = cuda.isAvailable();

/**
 * True when the "GPU" is the host build of the CUDA library (the CPU: make cuda-host, chosen with
 * DTRAIN_CUDA_LIB), not a real one.
 */
export const isHostBuild: boolean = hasGpu && cuda.getDeviceName(0).startsWith("dtrain host CUDA");

/** Why the GPU tests are skipped ("" when they run). */
export const noGpuReason: string = cuda.unavailableReason();

/** The reason, short enough for a test name (its first clause). */
const shortReason = noGpuReason.split(/[:(]/)[0].trim();

/** Declares a test that needs a GPU: ignored, with the reason in its name, where there is none. */
export function gpuTest(name: string, fn: () => void | Promise<void>): void {
  Deno.test({ name: hasGpu ? name : `${name} [skipped: ${shortReason}]`, ignore: !hasGpu, fn });
}

/** An accelerator family's first device. */
export type Accelerator = "cuda:0" | "emu:0";

/** What the `cuda` and `emu` namespaces share: the family's counterpart of `torch.cuda`. */
export type AcceleratorApi = Pick<
  typeof emu,
  "deviceCount" | "synchronize" | "setMatmulPrecision" | "getMatmulPrecision"
>;

/**
 * Declares `name` once per accelerator: `name [emu]`, always run, and `name [cuda]`, ignored with
 * the reason where there is no GPU.
 *
 * @param name What the test checks, device-neutral.
 * @param fn The test, given the family's first device and its namespace.
 */
export function deviceTest(
  name: string,
  fn: (device: Accelerator, api: AcceleratorApi) => void | Promise<void>,
): void {
  Deno.test(`${name} [emu]`, () => fn("emu:0", emu));
  gpuTest(`${name} [cuda]`, () => fn("cuda:0", cuda));
}

/**
 * A one-element f32 buffer over `t`'s host memory that says it is on cuda:0: what a collective
 * without CUDA (or over Gloo) must refuse instead of reading a device pointer.
 */
export function claimingGpu(t: { ptr: Deno.PointerValue }): TensorLike {
  return { dtype: "f32", numel: 1, isContiguous: () => true, ptr: t.ptr, device: "cuda:0" };
}
