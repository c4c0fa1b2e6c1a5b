/**
 * Autocast's state and its cast policy, which the ops read (autocast.ts is the public scope API).
 *
 * [Note: autocast]
 * As PyTorch's `torch.autocast`: inside an enabled scope for a device type, an op on the
 * lower-precision list casts its floating-point inputs on that device type to the scope's dtype
 * (bf16 or f16), an op on the fp32 list casts them to f32, and every other op runs in its inputs'
 * promoted dtype (see [Note: half compute] in ops/_half.ts). The lists follow PyTorch's CPU lists
 * (aten/src/ATen/autocast_mode.cpp, `AutocastCPU`) for the ops dtrain has: lower precision are
 * matmul (mm, bmm, matmul), linear and scaled_dot_product_attention (and packedCausalAttention,
 * dtrain's fused form of it); fp32 are cross_entropy_loss, nll_loss, mse_loss and
 * binary_cross_entropy_with_logits (checked against PyTorch 2.13's CPU autocast: a bf16
 * cross-entropy there equals the f32 one bit for bit, a bf16 log_softmax stays bf16). Softmax,
 * log-softmax, layer norm, GELU, dropout, embedding and the reductions are on neither CPU list:
 * they run in their input's dtype. PyTorch's CUDA lists differ (softmax, layer_norm and more are
 * fp32 there); dtrain uses the CPU lists on every device type.
 *
 * Casts of leaf tensors that require grad (the f32 weights) are cached for the outermost enabled
 * scope when `cacheEnabled`, so a weight used twice is cast once, as PyTorch's weight cast cache;
 * unlike PyTorch's, an entry is made again when the weight was written in place since (an
 * optimizer step inside the scope), when the cast was freed (by a tidy() inside the scope), and
 * in grad mode when it was made under noGrad (it would cut the weight from the graph).
 * Inside an op's own computation autocast is off (PyTorch excludes its dispatch key there).
 *
 * The state lives in an AsyncLocalStorage: a scope's state is seen by the code it runs, across
 * its awaits, and by nothing that runs beside it (JavaScript has no threads, but concurrent async
 * work interleaves: a plain global would leak an async scope into it).
 * @module
 */

import { AsyncLocalStorage } from "node:async_hooks";
import { type HalfDType, isFloat } from "./dtype.ts";
import type { Tensor } from "./tensor.ts";
import { to } from "./ops/shape.ts";
import { isGradEnabled } from "./grad_mode.ts";
import { FAMILIES, FAMILY_NAMES, type FamilyName, familyOf } from "./device/mod.ts";

/** The device types autocast knows: every family of src/tensor/device/family.ts. */
export type AutocastDeviceType = FamilyName;

/** One device type's autocast settings. */
export interface DeviceAutocast {
  /** Whether ops on tensors of this device type autocast. */
  readonly enabled: boolean;
  /** The lower-precision dtype. */
  readonly dtype: HalfDType;
}

/** The state one scope sees: each device type's settings, and the weight cast cache. */
export interface AutocastState {
  readonly devices: Readonly<Record<AutocastDeviceType, DeviceAutocast>>;
  /** Whether casts of leaf tensors that require grad are cached. */
  readonly cacheEnabled: boolean;
  /** The cast cache of the outermost enabled scope (null outside any). */
  readonly cache: Map<Tensor, CachedCast> | null;
}

/** A cached cast and the version of the source's storage it was made from. */
export interface CachedCast {
  readonly cast: Tensor;
  readonly version: number;
}

/** Off everywhere, each family's dtype its record's (PyTorch's: bf16 on CPU, f16 on CUDA). */
const DEFAULT: AutocastState = {
  devices: Object.fromEntries(
    FAMILY_NAMES.map((name) => [name, { enabled: false, dtype: FAMILIES[name].autocastDtype }]),
  ) as Record<AutocastDeviceType, DeviceAutocast>,
  cacheEnabled: true,
  cache: null,
};

const storage = new AsyncLocalStorage<AutocastState>();
/** Depth of op computations under way, inside which autocast is off. */
let suppressed = 0;

/** The state the running code sees. */
export function currentAutocast(): AutocastState {
  return storage.getStore() ?? DEFAULT;
}

/** Runs `fn` with `state` as the autocast state (and its awaits, for an async `fn`). */
export function runWithAutocast<T>(state: AutocastState, fn: () => T): T {
  return storage.run(state, fn);
}

/** Whether autocast is on for `t`'s device type here (not inside an op's own computation). */
export function autocastActiveFor(t: Tensor): boolean {
  if (suppressed > 0) return false;
  // A family registered at run time has no record, and no autocast.
  const type = familyOf(t.device);
  return type !== null && currentAutocast().devices[type].enabled;
}

/** Runs `fn` with autocast off: an op's own computation on the inputs it already cast. */
export function withoutAutocast<T>(fn: () => T): T {
  suppressed++;
  try {
    return fn();
  } finally {
    suppressed--;
  }
}

/** The ops that autocast casts to the lower-precision dtype (PyTorch's CPU lower_precision_fp). */
const LOWER = new Set(["matmul", "linear", "scaledDotProductAttention", "packedCausalAttention"]);
/** The ops that autocast runs in f32 (PyTorch's CPU fp32 list, as far as dtrain has them). */
const FP32 = new Set(["crossEntropy", "mseLoss", "nllLoss", "binaryCrossEntropyWithLogits"]);

/**
 * `inputs` as autocast's policy for `op` wants them: `args` (cast where the policy says) and
 * `made`, the casts this call made (not the cached ones), which the op frees when no graph
 * holds them.
 *
 * @param op The op's name.
 * @param inputs Its tensor arguments.
 */
export function autocastInputs<A extends (Tensor | null | undefined)[]>(
  op: string,
  inputs: A,
): { args: A; made: Tensor[] } {
  const lower = LOWER.has(op);
  if (!lower && !FP32.has(op)) return { args: inputs, made: [] };
  const first = inputs.find((t): t is Tensor => !!t && isFloat(t.dtype));
  if (first === undefined || !autocastActiveFor(first)) return { args: inputs, made: [] };
  const state = currentAutocast();
  const target = lower ? state.devices[familyOf(first.device)!].dtype : "f32";
  const made: Tensor[] = [];
  const args = inputs.map((t) => {
    if (t === null || t === undefined || !isFloat(t.dtype) || t.dtype === target) return t;
    if (!autocastActiveFor(t)) return t;
    const cacheable = lower && state.cacheEnabled && state.cache !== null && t.requiresGrad &&
      t.gradFn === null && t.dtype === "f32";
    if (cacheable) {
      // A cast freed by a tidy() inside the scope, or of a weight updated since, is made again.
      // A cast made under noGrad has no graph: in grad mode it is made again, so that the
      // gradient reaches the weight.
      const hit = state.cache!.get(t);
      const fresh = hit && !hit.cast.disposed && hit.version === t.storage.version &&
        (hit.cast.gradFn !== null || !isGradEnabled());
      if (fresh) return hit.cast;
      const cast = to(t, target);
      state.cache!.set(t, { cast, version: t.storage.version });
      return cast;
    }
    const cast = to(t, target);
    made.push(cast);
    return cast;
  }) as A;
  return { args, made };
}
