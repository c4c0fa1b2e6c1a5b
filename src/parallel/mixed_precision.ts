/**
 * Mixed precision for data parallelism, in the shape of PyTorch FSDP2's `MixedPrecisionPolicy`:
 * `{ paramDtype: "bf16", reduceDtype: "f32" }`, taken by DDP (`mixedPrecision`) and FSDP
 * (`mpPolicy`).
 *
 * [Note: mixed precision]
 * dtrain keeps every tensor in f32 (the master weights, activations and gradients). A bf16
 * `paramDtype` makes the accelerator's matrix products and attention compute with their operands
 * rounded to bf16 and f32 accumulation (`cuda.setMatmulPrecision("medium")` on a GPU, see [Note:
 * matmul precision] in csrc/cuda/matmul.cu; `emu.setMatmulPrecision("medium")` on the emulated
 * one): the numerics of FSDP's bf16 unsharded parameters for those ops, while elementwise ops,
 * norms and the loss stay f32. Which setter applies is chosen by the parameters' device family
 * (`MATMUL_PRECISION` below). Gradients are reduced in f32 (the only
 * `reduceDtype` offered): a bf16 all-reduce would halve the traffic at a cost in accuracy that
 * dtrain does not take yet.
 * @module
 */

import type { Module } from "../nn/module.ts";
import type { Parameter } from "../nn/parameter.ts";
import { cuda, emu } from "../tensor/device/mod.ts";

/** Per device family whose products can compute in bf16: how to set its matmul precision. */
const MATMUL_PRECISION: Readonly<Record<string, (precision: "medium") => void>> = {
  cuda: cuda.setMatmulPrecision,
  emu: emu.setMatmulPrecision,
};

/** Element types of a mixed-precision policy. */
export type PrecisionDtype = "f32" | "bf16";

/** PyTorch FSDP2's `MixedPrecisionPolicy`, camelCase (see [Note: mixed precision]). */
export interface MixedPrecisionPolicy {
  /** What matrix products and attention compute in (default "f32"; "bf16" needs an accelerator). */
  paramDtype?: PrecisionDtype;
  /** What gradients are reduced in (default and only "f32"). */
  reduceDtype?: "f32";
}

/**
 * Checks `policy` against `module` and puts it into effect (process-wide, as an accelerator's
 * matmul precision is), on the device family of each of its parameters.
 *
 * @param what Who asks, for messages (`DistributedDataParallel`).
 * @param module The model, whose parameters must be on an accelerator (cuda, emu) for bf16.
 * @param policy The policy (absent: full f32, nothing changes).
 * @param field The option's name, for messages (FSDP's is `mpPolicy`).
 * @throws RangeError naming the bad field and its value, or the device of a parameter.
 */
export function applyMixedPrecision(
  what: string,
  module: Module,
  policy: MixedPrecisionPolicy | undefined,
  field = "mixedPrecision",
): void {
  if (policy === undefined) return;
  const paramDtype = policy.paramDtype ?? "f32";
  const reduceDtype = policy.reduceDtype ?? "f32";
  if (paramDtype !== "f32" && paramDtype !== "bf16") {
    throw new RangeError(
      `${what}: ${field}.paramDtype must be "f32" or "bf16", got "${paramDtype}"`,
    );
  }
  if (reduceDtype !== "f32") {
    throw new RangeError(
      `${what}: ${field}.reduceDtype must be "f32" (gradients reduce in f32), got "${reduceDtype}"`,
    );
  }
  if (paramDtype === "f32") return;
  const onCpu = module.parameters().find((p) => p.storage.backend.isHostMemory);
  if (onCpu !== undefined) {
    throw new RangeError(
      `${what}: ${field}.paramDtype "bf16" computes on a GPU, but a parameter is on ` +
        `${onCpu.device}; call model.to("cuda") first`,
    );
  }
  const unknown = module.parameters().find((p) => !Object.hasOwn(MATMUL_PRECISION, family(p)));
  if (unknown !== undefined) {
    throw new RangeError(
      `${what}: ${field}.paramDtype "bf16" computes on a GPU, but a parameter is on ` +
        `${unknown.device}, whose products have no bf16 precision (those of ${
          Object.keys(MATMUL_PRECISION).join(", ")
        } do)`,
    );
  }
  for (const name of new Set(module.parameters().map(family))) MATMUL_PRECISION[name]("medium");
}

/** The family of the device a parameter is on (`"cuda"` for `cuda:1`). */
function family(p: Parameter): string {
  return p.device.split(":")[0];
}
