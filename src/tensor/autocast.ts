/**
 * Automatic mixed precision as a scope, PyTorch's `torch.autocast`: `autocast(options, fn)` runs
 * `fn` with autocast on (or off) for one device type. Which op runs in which dtype is in
 * [Note: autocast] (autocast_state.ts).
 * @module
 */

import { checkDType, type HalfDType, isHalf } from "./dtype.ts";
import {
  type AutocastDeviceType,
  type AutocastState,
  currentAutocast,
  runWithAutocast,
} from "./autocast_state.ts";
import { FAMILY_NAMES, isFamilyName } from "./device/mod.ts";

export type { AutocastDeviceType } from "./autocast_state.ts";

/** The lower-precision dtypes autocast casts to: bf16 (torch.bfloat16) or f16 (torch.float16). */
export type AutocastDtype = HalfDType;

/** Options of {@linkcode autocast}, as `torch.autocast`'s arguments. */
export interface AutocastOptions {
  /** The device type whose ops autocast: a device family ("cpu", "cuda"), without an index. */
  deviceType: AutocastDeviceType;
  /** The lower-precision dtype; the device type's current one when absent (bf16 on CPU, f16 else). */
  dtype?: AutocastDtype;
  /** false runs `fn` with autocast off for the device type (inside an enabled scope too). */
  enabled?: boolean;
  /** Whether casts of weights (leaves that require grad) are cached in the scope (default true). */
  cacheEnabled?: boolean;
}

/** The state inside a scope with `options`, from the state around it. */
function enter(options: AutocastOptions): AutocastState {
  const outer = currentAutocast();
  const type = checkType(options?.deviceType);
  const dtype = options.dtype ?? outer.devices[type].dtype;
  checkDType("autocast", dtype);
  if (!isHalf(dtype)) {
    throw new TypeError(`autocast: dtype must be "bf16" or "f16", got "${dtype}"`);
  }
  const enabled = options.enabled ?? true;
  const cacheEnabled = options.cacheEnabled ?? outer.cacheEnabled;
  return {
    devices: { ...outer.devices, [type]: { enabled, dtype } },
    cacheEnabled,
    // The outermost enabled scope owns the cache; nested scopes share it (PyTorch clears its
    // cache when the outermost scope exits).
    cache: outer.cache ?? (enabled ? new Map() : null),
  };
}

/**
 * Runs `fn` with autocast set by `options` for one device type, and returns its result. Scopes
 * nest (an inner `enabled: false` turns autocast off for its body); the state around the scope
 * is back when `fn` returns or throws.
 *
 * @param options The device type, dtype and switches (see {@linkcode AutocastOptions}).
 * @param fn The code to run in the scope.
 * @returns What `fn` returns.
 *
 * @example A linear layer's matmul in bf16, its gradient in f32
 * ```ts
 * import assert from "node:assert/strict";
 * import { autocast, F, randn } from "../../mod.ts";
 * const x = randn([2, 4]), w = randn([3, 4], { requiresGrad: true });
 * const y = autocast({ deviceType: "cpu", dtype: "bf16" }, () => F.linear(x, w));
 * assert.equal(y.dtype, "bf16");
 * y.to("f32").sum().backward();
 * assert.equal(w.grad!.dtype, "f32");
 * ```
 */
export function autocast<T>(options: AutocastOptions, fn: () => T): T {
  return runWithAutocast(enter(options), fn);
}

/**
 * {@linkcode autocast} for an async `fn`: the scope holds across `fn`'s awaits and ends when its
 * promise settles. Code running concurrently (started outside the scope) does not see it: the
 * state travels with the async context (node:async_hooks' AsyncLocalStorage), not in a global.
 *
 * @param options The device type, dtype and switches (see {@linkcode AutocastOptions}).
 * @param fn The async code to run in the scope.
 * @returns fn's promise.
 */
export function autocastAsync<T>(options: AutocastOptions, fn: () => Promise<T>): Promise<T> {
  return runWithAutocast(enter(options), fn);
}

/**
 * Whether autocast is on here for `deviceType` (PyTorch's `torch.is_autocast_enabled`).
 *
 * @param deviceType A device family (default "cpu").
 */
export function isAutocastEnabled(deviceType: AutocastDeviceType = "cpu"): boolean {
  return currentAutocast().devices[checkType(deviceType)].enabled;
}

/**
 * The lower-precision dtype autocast uses here for `deviceType` (PyTorch's
 * `torch.get_autocast_dtype`): bf16 on CPU and f16 elsewhere unless a scope said otherwise.
 *
 * @param deviceType A device family.
 */
export function getAutocastDtype(deviceType: AutocastDeviceType): AutocastDtype {
  return currentAutocast().devices[checkType(deviceType)].dtype;
}

/** `deviceType` checked (for callers in plain JavaScript, or past a cast). */
function checkType(deviceType: string | undefined): AutocastDeviceType {
  if (typeof deviceType !== "string" || !isFamilyName(deviceType)) {
    const names = FAMILY_NAMES.map((name) => JSON.stringify(name));
    throw new RangeError(
      `autocast: deviceType must be ${names.slice(0, -1).join(", ")} or ${names.at(-1)}, got ${
        JSON.stringify(deviceType)
      }`,
    );
  }
  return deviceType;
}
