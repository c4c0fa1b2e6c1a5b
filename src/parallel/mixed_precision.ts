/**
 * Mixed precision for data parallelism, in the shape of PyTorch FSDP2's `MixedPrecisionPolicy`:
 * `{ paramDtype: "bf16", reduceDtype: "f32", castForwardInputs: true }`, taken by FSDP
 * (`mpPolicy`) and DDP (`mixedPrecision`).
 *
 * [Note: mixed precision]
 * The parameters the optimizer steps on stay f32 (FSDP's shards, DDP's parameters); what
 * computes and what travels is narrower, on every device (cpu, emu, cuda), as in PyTorch:
 * - FSDP (`fullyShard`, FSDP2's policy): each all-gather sends the f32 shards cast to
 *   `paramDtype` (round to nearest even), so a bf16 gather moves half the bytes, and the unsharded
 *   parameters that forward and backward use are `paramDtype` tensors (the ops compute through f32
 *   and round each output, see src/tensor/ops/_half.ts). `castForwardInputs` (default true) casts
 *   the floating-point tensors among each sharded module's forward inputs to `paramDtype`. The
 *   gradients of the unsharded parameters (`paramDtype`) are widened exactly to f32, summed there
 *   (over noSync steps too), cast to `reduceDtype` (default `paramDtype`, as FSDP2) and
 *   reduce-scattered: "avg" for f32 and bf16, and for f16 FSDP2's division before and after a sum
 *   (`gradientDivideFactors`; dtrain divides after widening to f32, PyTorch before); this rank's
 *   chunk is widened to f32 into the shards' `.grad`. A bf16 sum rounds at every step of the reduction ([Note: half reductions] in
 *   csrc/gloo/reduce.cc), in rank order where PyTorch's Gloo and NCCL go round a ring.
 * - DDP (PyTorch's `_MixedPrecision` for DDP, simplified): `paramDtype` casts each parameter to a
 *   `paramDtype` copy in the graph for the forward (the differentiable `to()`, whose backward
 *   widens the gradient into the f32 parameter's `.grad`); inputs are cast as for FSDP.
 *   `reduceDtype` "bf16" or "f16" reduces every bucket as PyTorch's `bf16_compress_hook` /
 *   `fp16_compress_hook`: the f32 bucket is cast down, divided by the world size, all-reduced
 *   (sum) and copied back into the f32 bucket. DDP's `reduceDtype` defaults to "f32" (DDP's
 *   buckets hold the f32 parameters' gradients; the hook is opt-in in PyTorch too).
 * @module
 */

import { Tensor } from "../tensor/tensor.ts";

/** Element types of a mixed-precision policy. */
export type PrecisionDtype = "f32" | "bf16" | "f16";

const DTYPES: readonly PrecisionDtype[] = ["f32", "bf16", "f16"];

/** PyTorch FSDP2's `MixedPrecisionPolicy`, camelCase (see [Note: mixed precision]). */
export interface MixedPrecisionPolicy {
  /** What the parameters compute and are gathered in (default "f32": no cast). */
  paramDtype?: PrecisionDtype;
  /** What gradients are reduced in (default: FSDP `paramDtype`, DDP "f32"). */
  reduceDtype?: PrecisionDtype;
  /** Whether floating-point forward inputs are cast to `paramDtype` (default true). */
  castForwardInputs?: boolean;
}

/** A policy with every field decided. */
export interface ResolvedPolicy {
  /** What the parameters compute in. */
  paramDtype: PrecisionDtype;
  /** What gradients are reduced in. */
  reduceDtype: PrecisionDtype;
  /** Whether floating-point forward inputs are cast to `paramDtype`. */
  castForwardInputs: boolean;
}

/**
 * Checks `policy` and fills in its defaults.
 *
 * @param what Who asks, for messages (`fullyShard`, `DistributedDataParallel`).
 * @param policy The policy (absent: everything f32).
 * @param field The option's name, for messages (`mpPolicy`, `mixedPrecision`).
 * @param reduceDefault `reduceDtype` when absent: "param" (FSDP2's: `paramDtype`) or "f32" (DDP).
 * @returns The resolved policy.
 * @throws RangeError naming the bad field and its value.
 *
 * @example FSDP2's defaults
 * ```ts
 * import assert from "node:assert/strict";
 * import { resolveMixedPrecision } from "./mixed_precision.ts";
 * assert.deepEqual(resolveMixedPrecision("fullyShard", { paramDtype: "bf16" }, "mpPolicy"), {
 *   paramDtype: "bf16", reduceDtype: "bf16", castForwardInputs: true,
 * });
 * ```
 */
export function resolveMixedPrecision(
  what: string,
  policy: MixedPrecisionPolicy | undefined,
  field: string,
  reduceDefault: "param" | "f32" = "param",
): ResolvedPolicy {
  if (policy !== undefined && (policy === null || typeof policy !== "object")) {
    throw new RangeError(`${what}: ${field} must be an object, got ${policy}`);
  }
  const known = ["paramDtype", "reduceDtype", "castForwardInputs"];
  const unknown = Object.keys(policy ?? {}).find((k) => !known.includes(k));
  if (unknown !== undefined) {
    throw new RangeError(
      `${what}: ${field}.${unknown} is not a field of the policy (it has ${known.join(", ")})`,
    );
  }
  const paramDtype = policy?.paramDtype ?? "f32";
  checkDtype(what, `${field}.paramDtype`, paramDtype);
  const reduceDtype = policy?.reduceDtype ?? (reduceDefault === "param" ? paramDtype : "f32");
  checkDtype(what, `${field}.reduceDtype`, reduceDtype);
  const castForwardInputs = policy?.castForwardInputs ?? true;
  if (typeof castForwardInputs !== "boolean") {
    throw new RangeError(
      `${what}: ${field}.castForwardInputs must be a boolean, got ${castForwardInputs}`,
    );
  }
  return { paramDtype, reduceDtype, castForwardInputs };
}

function checkDtype(what: string, field: string, dtype: unknown): void {
  if (!DTYPES.includes(dtype as PrecisionDtype)) {
    throw new RangeError(`${what}: ${field} must be one of ${DTYPES.join(", ")}, got "${dtype}"`);
  }
}

/**
 * The floating-point tensors in `value` (a tensor, or arrays and plain records of them, as
 * PyTorch's `_apply_to_tensors` walks) cast to `dtype` in the graph; anything else as it is.
 *
 * @param value A forward input.
 * @param dtype The policy's `paramDtype`.
 * @returns The input with its floating-point tensors cast.
 */
export function castFloatInputs(value: unknown, dtype: PrecisionDtype): unknown {
  if (value instanceof Tensor) {
    const float = value.dtype === "f32" || value.dtype === "bf16" || value.dtype === "f16";
    return float && value.dtype !== dtype ? value.to(dtype) : value;
  }
  if (Array.isArray(value)) return value.map((v) => castFloatInputs(v, dtype));
  if (
    value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype
  ) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, castFloatInputs(v, dtype)]),
    );
  }
  return value;
}

/**
 * How FSDP2 averages gradients over `size` ranks in `reduceDtype` (`_get_gradient_divide_factors`):
 * f32 and bf16 reduce with "avg" (a sum for one rank); f16, whose range is narrow, divides by a
 * power of two near √size before a "sum" and by the rest after.
 *
 * @param size The group's size.
 * @param reduceDtype The dtype gradients are reduced in.
 * @returns The divisor before (1: none), the reduce op, and the divisor after (1: none).
 */
export function gradientDivideFactors(
  size: number,
  reduceDtype: PrecisionDtype,
): { pre: number; op: "avg" | "sum"; post: number } {
  if (reduceDtype !== "f16") return { pre: 1, op: size > 1 ? "avg" : "sum", post: 1 };
  let pre = 1;
  while (size % pre === 0 && size / pre > pre) pre *= 2;
  return { pre, op: "sum", post: size / pre };
}
