/**
 * The job's `--dtype`: f32, or bf16 as nanoGPT's `dtype = 'bfloat16'` trains (its `ctx`, autocast
 * around the forward pass and the loss), with the data-parallel wrapper's communication in bf16
 * too: DDP all-reduces its buckets in bf16 (PyTorch's bf16_compress_hook), FSDP all-gathers bf16
 * parameters and reduce-scatters bf16 gradients (FSDP2's `MixedPrecisionPolicy(param_dtype=
 * torch.bfloat16)`), half the bytes of f32's. The weights, their gradients after the reduction
 * and the optimizer's state stay f32.
 * @module
 */

import type { MixedPrecisionPolicy } from "../parallel/mixed_precision.ts";
import { autocast } from "../tensor/autocast.ts";
import type { TrainConfig } from "./config.ts";

type Precision = Pick<TrainConfig, "dtype" | "device">;

/**
 * `fn` run under autocast to bf16 on the job's device type when `--dtype bf16` (as nanoGPT's
 * `with ctx:`), else `fn` itself.
 */
export function withAutocast<A extends unknown[], R>(
  config: Precision,
  fn: (...args: A) => R,
): (...args: A) => R {
  if (config.dtype === "f32") return fn;
  const options = { deviceType: config.device, dtype: config.dtype } as const;
  return (...args) => autocast(options, () => fn(...args));
}

/** FSDP's policy for `--dtype`: bf16 gathers and reduce-scatters under bf16, else none. */
export function fsdpPolicy(config: Precision): MixedPrecisionPolicy | undefined {
  return config.dtype === "bf16" ? { paramDtype: "bf16" } : undefined;
}

/** DDP's policy for `--dtype`: bucket all-reduces in bf16 under bf16, else none. */
export function ddpPolicy(config: Precision): MixedPrecisionPolicy | undefined {
  return config.dtype === "bf16" ? { reduceDtype: "bf16" } : undefined;
}
