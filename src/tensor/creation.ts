/** Tensor creation: from data, filled, random, ranges. @module */

import { fillRaw } from "./inplace.ts";
import { checkShape, formatShape, shapeSize } from "./layout.ts";
import { nextRandomOffset, randomSeed } from "./random.ts";
import { Tensor, type TensorOptions } from "./tensor.ts";

/** Nested arrays of numbers, as `tensor()` takes them. */
export type NestedArray = number | NestedArray[];

function inferDataShape(data: NestedArray): number[] {
  const shape: number[] = [];
  let level: NestedArray = data;
  while (Array.isArray(level)) {
    shape.push(level.length);
    level = level[0];
  }
  return shape;
}

function flatten(data: NestedArray, shape: number[], depth: number, out: number[]): void {
  if (depth === shape.length) {
    if (typeof data !== "number") {
      throw new TypeError(`tensor: expected a number at depth ${depth}, got ${typeof data}`);
    }
    out.push(data);
    return;
  }
  if (!Array.isArray(data) || data.length !== shape[depth]) {
    throw new RangeError(
      `tensor: ragged nested array (expected ${shape[depth]} elements at depth ${depth})`,
    );
  }
  for (const item of data) flatten(item, shape, depth + 1, out);
}

function finish(t: Tensor, options: TensorOptions): Tensor {
  if (options.requiresGrad) t.requiresGrad_(true);
  return t;
}

/**
 * A tensor holding a copy of `data`: nested arrays, a flat array or a typed array (with `shape`).
 *
 * @param data The values.
 * @param shape The shape; inferred from nested arrays, or `[data.length]`, when omitted.
 * @param options dtype (f32 default, i32 for Int32Array data), device, requiresGrad.
 * @returns A new contiguous tensor.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * const x = tensor([[1, 2], [3, 4]]);
 * assert.deepStrictEqual(x.shape, [2, 2]);
 * assert.deepStrictEqual(x.toArray(), new Float32Array([1, 2, 3, 4]));
 * ```
 */
export function tensor(
  data: NestedArray | Float32Array | Int32Array | Uint8Array,
  shape?: readonly number[],
  options: TensorOptions = {},
): Tensor {
  const dtype = options.dtype ?? (data instanceof Int32Array ? "i32" : "f32");
  let flat: ArrayLike<number>;
  let inferred: number[];
  if (ArrayBuffer.isView(data)) {
    flat = data;
    inferred = [data.length];
  } else {
    inferred = inferDataShape(data);
    const values: number[] = [];
    flatten(data, inferred, 0, values);
    flat = values;
  }
  const finalShape = shape ? [...shape] : inferred;
  checkShape(finalShape, "tensor");
  if (shapeSize(finalShape) !== flat.length) {
    throw new RangeError(
      `tensor: ${flat.length} values do not fill shape ${formatShape(finalShape)}`,
    );
  }
  const t = Tensor.empty(finalShape, dtype, false, options.device);
  if (flat.length > 0) {
    const typed = dtype === "f32"
      ? (flat instanceof Float32Array ? flat : Float32Array.from(flat))
      : dtype === "i32"
      ? (flat instanceof Int32Array ? flat : Int32Array.from(flat))
      : Uint8Array.from(flat, (v) => (v ? 1 : 0));
    t.storage.backend.copyIn(t.ptr, Deno.UnsafePointer.of(typed), typed.byteLength);
  }
  return finish(t, options);
}

/** A tensor filled with `value`. */
export function full(shape: readonly number[], value: number, options: TensorOptions = {}): Tensor {
  checkShape(shape, "full");
  const dtype = options.dtype ?? "f32";
  const t = Tensor.empty([...shape], dtype, false, options.device);
  fillRaw(t, value);
  return finish(t, options);
}

/** A tensor of zeros. */
export function zeros(shape: readonly number[], options: TensorOptions = {}): Tensor {
  checkShape(shape, "zeros");
  return finish(Tensor.empty([...shape], options.dtype ?? "f32", true, options.device), options);
}

/** A tensor of ones. */
export function ones(shape: readonly number[], options: TensorOptions = {}): Tensor {
  return full(shape, 1, options);
}

/** Zeros shaped like `t`. */
export function zerosLike(t: Tensor, options: TensorOptions = {}): Tensor {
  return zeros(t.shape, { dtype: t.dtype, device: t.device, ...options });
}

/** Samples from N(mean, std²) from the global generator (seed with `manualSeed`). */
export function randn(
  shape: readonly number[],
  options: TensorOptions & { mean?: number; std?: number } = {},
): Tensor {
  checkShape(shape, "randn");
  const t = Tensor.empty([...shape], "f32", false, options.device);
  const n = t.numel(), dev = t.storage.backend;
  dev.check(
    dev.kernels.randn(
      t.ptr,
      n,
      options.mean ?? 0,
      options.std ?? 1,
      randomSeed(),
      nextRandomOffset(2 * n),
    ),
  );
  return finish(t, options);
}

/** Samples from U[low, high) (default [0, 1)) from the global generator. */
export function rand(
  shape: readonly number[],
  options: TensorOptions & { low?: number; high?: number } = {},
): Tensor {
  checkShape(shape, "rand");
  const t = Tensor.empty([...shape], "f32", false, options.device);
  const n = t.numel(), dev = t.storage.backend;
  dev.check(
    dev.kernels.randUniform(
      t.ptr,
      n,
      options.low ?? 0,
      options.high ?? 1,
      randomSeed(),
      nextRandomOffset(n),
    ),
  );
  return finish(t, options);
}

/** Values from `start` up to (not including) `end` by `step`, like `torch.arange`. */
export function arange(start: number, end?: number, step = 1, options: TensorOptions = {}): Tensor {
  if (end === undefined) [start, end] = [0, start];
  if (step === 0) throw new RangeError("arange: step must not be zero");
  const n = Math.max(0, Math.ceil((end - start) / step));
  const values = new Array<number>(n);
  for (let i = 0; i < n; i++) values[i] = start + i * step;
  const allInts = Number.isInteger(start) && Number.isInteger(end) && Number.isInteger(step);
  return tensor(values, [n], { dtype: options.dtype ?? (allInts ? "i32" : "f32"), ...options });
}
