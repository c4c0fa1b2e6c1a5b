/** Tensor creation: from data, filled, random, ranges. @module */

import { DTypeCode } from "./device/device.ts";
import { checkDType, type DType, type HalfDType, isHalf, refuseStorageOnly } from "./dtype.ts";
import { fillRaw } from "./inplace.ts";
import { checkShape, formatShape, shapeSize } from "./layout.ts";
import { checkRandintBounds, nextRandomOffset, randomSeed } from "./random.ts";
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

/** The data `tensor()` takes: nested arrays, or a typed array. */
export type TensorData =
  | NestedArray
  | Float32Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | BigInt64Array;

/** The dtype of data when `options.dtype` is absent: typed integers keep theirs (i64 as i32). */
function defaultDType(data: TensorData): DType {
  if (data instanceof Int32Array || data instanceof BigInt64Array) return "i32";
  return data instanceof Uint16Array ? "u16" : "f32";
}

/**
 * i64 data (PyTorch's default integers) as i32 numbers: dtrain has no i64, and token ids,
 * indices and labels fit; a value that does not is refused, with its index.
 */
function fromInt64(data: BigInt64Array): Int32Array {
  const out = new Int32Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (v < -2147483648n || v > 2147483647n) {
      throw new RangeError(
        `tensor: BigInt64Array value ${v} at index ${i} does not fit i32 (dtrain has no i64; ` +
          "i64 data converts to i32 when every value fits)",
      );
    }
    out[i] = Number(v);
  }
  return out;
}

/** The values as the typed array of `dtype`, checked where a silent wrap would corrupt them. */
function typedFor(
  flat: ArrayLike<number>,
  dtype: DType,
): Float32Array | Int32Array | Uint8Array | Uint16Array {
  if (dtype === "f32") return flat instanceof Float32Array ? flat : Float32Array.from(flat);
  if (dtype === "i32") return flat instanceof Int32Array ? flat : Int32Array.from(flat);
  if (dtype === "bool") return Uint8Array.from(flat, (v) => (v ? 1 : 0));
  if (flat instanceof Uint16Array) return flat;
  for (let i = 0; i < flat.length; i++) {
    const v = flat[i];
    if (!Number.isInteger(v) || v < 0 || v > 65535) {
      throw new RangeError(
        `tensor: value ${v} at index ${i} is not a u16 (an integer in [0, 65535])`,
      );
    }
  }
  return Uint16Array.from(flat);
}

/**
 * [Note: making 2-byte floats]
 * bf16 and f16 tensors are made in f32 on their device and rounded there by the one conversion
 * kernel (`castF32Half`, the bits of PyTorch's `x.to(torch.bfloat16)`), so that `tensor`, `full`,
 * `randn` and `to` agree bit for bit. Numbers become f32 first (`Math.fround`), as PyTorch's
 * `torch.tensor(values, dtype=torch.bfloat16)` also goes through float; only a NaN's bits differ
 * from that path (0xFFFF where its scalar conversion writes 0x7FC0), and a NaN stays a NaN.
 * Values past the largest finite one round to infinity, as in PyTorch: not an error.
 */

/** A `dtype` tensor of `src`'s rounded values on `src`'s device; disposes `src` (f32). */
function rounded(src: Tensor, dtype: HalfDType): Tensor {
  const out = Tensor.empty(src.shape, dtype, false, src.device);
  const dev = out.storage.backend;
  try {
    if (src.numel() > 0) {
      dev.check(dev.kernels.castF32Half(src.ptr, out.ptr, src.numel(), DTypeCode[dtype]));
    }
  } catch (error) {
    out.dispose();
    throw error;
  } finally {
    src.dispose();
  }
  return out;
}

/**
 * A tensor holding a copy of `data`: nested arrays, a flat array or a typed array (with `shape`).
 *
 * @param data The values.
 * @param shape The shape; inferred from nested arrays, or `[data.length]`, when omitted.
 * @param options dtype (f32 default; i32 for Int32Array data, u16 for Uint16Array data, and i32
 *   for BigInt64Array data, whose values must fit; bf16 or f16 round the values, as f32, to
 *   nearest even with PyTorch's bits, see [Note: making 2-byte floats]), device, requiresGrad.
 *   A Uint16Array with dtype bf16 or f16 is refused: it could be values or raw bits; raw bits
 *   are `tensor(bits).view("bf16")` (a u16 tensor reinterpreted), values a Float32Array.
 * @returns A new contiguous tensor.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * const x = tensor([[1, 2], [3, 4]]);
 * assert.deepStrictEqual(x.shape, [2, 2]);
 * assert.deepStrictEqual(x.toArray(), new Float32Array([1, 2, 3, 4]));
 * const h = tensor([1.00390625, 1 / 3], [2], { dtype: "bf16" }); // rounded to nearest even
 * assert.deepStrictEqual(h.toArray(), new Float32Array([1, 0.333984375]));
 * assert.deepStrictEqual(h.view("u16").toArray(), new Uint16Array([0x3f80, 0x3eab]));
 * ```
 */
export function tensor(
  data: TensorData,
  shape?: readonly number[],
  options: TensorOptions = {},
): Tensor {
  const dtype = options.dtype ?? defaultDType(data);
  checkDType("tensor", dtype);
  if (data instanceof Uint16Array && isHalf(dtype)) {
    throw new TypeError(
      `tensor: a Uint16Array with dtype ${dtype} could be values or raw bits; for bits use ` +
        `tensor(bits).view("${dtype}"), for values pass a Float32Array (Float32Array.from(data))`,
    );
  }
  let flat: ArrayLike<number>;
  let inferred: number[];
  if (data instanceof BigInt64Array) {
    flat = fromInt64(data);
    inferred = [data.length];
  } else if (ArrayBuffer.isView(data)) {
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
  const t = Tensor.empty(finalShape, isHalf(dtype) ? "f32" : dtype, false, options.device);
  if (flat.length > 0) {
    const typed = typedFor(flat, isHalf(dtype) ? "f32" : dtype);
    t.storage.backend.copyIn(t.ptr, Deno.UnsafePointer.of(typed), typed.byteLength);
  }
  return finish(isHalf(dtype) ? rounded(t, dtype) : t, options);
}

/**
 * A tensor filled with `value` (bf16 and f16: `value` rounded to nearest even, as `tensor` does).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { full } from "../../mod.ts";
 * assert.deepStrictEqual(full([2], 0.1, { dtype: "f16" }).toArray(), Float32Array.of(0.0999755859375, 0.0999755859375));
 * ```
 */
export function full(shape: readonly number[], value: number, options: TensorOptions = {}): Tensor {
  checkShape(shape, "full");
  const dtype = options.dtype ?? "f32";
  checkDType("full", dtype);
  refuseStorageOnly("full", dtype);
  const t = Tensor.empty([...shape], dtype, false, options.device);
  fillRaw(t, value);
  return finish(t, options);
}

/** A tensor of zeros (of any dtype: zero bytes are +0 in bf16 and f16 too). */
export function zeros(shape: readonly number[], options: TensorOptions = {}): Tensor {
  checkShape(shape, "zeros");
  checkDType("zeros", options.dtype ?? "f32");
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

/**
 * The dtype a float sampler makes: f32 unless `options.dtype` names bf16 or f16, which get the f32
 * draw rounded (PyTorch's bits for `torch.randn(..., dtype=torch.bfloat16)`).
 */
function samplerDType(op: string, options: TensorOptions): "f32" | HalfDType {
  const dtype = options.dtype ?? "f32";
  checkDType(op, dtype);
  if (dtype !== "f32" && !isHalf(dtype)) {
    throw new TypeError(`${op}: makes floating-point tensors (f32, bf16, f16), not ${dtype}`);
  }
  return dtype;
}

/** The sampled f32 tensor `t`, rounded to `dtype` when it is a 2-byte float. */
function sampled(t: Tensor, dtype: "f32" | HalfDType, options: TensorOptions): Tensor {
  return finish(dtype === "f32" ? t : rounded(t, dtype), options);
}

/**
 * Samples from N(mean, std²) from the global generator (seed with `manualSeed`); dtype f32, or
 * bf16 / f16 for the same draw rounded (as PyTorch's `torch.randn(..., dtype=torch.bfloat16)`).
 */
export function randn(
  shape: readonly number[],
  options: TensorOptions & { mean?: number; std?: number } = {},
): Tensor {
  checkShape(shape, "randn");
  const dtype = samplerDType("randn", options);
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
  return sampled(t, dtype, options);
}

/** Samples from U[low, high) (default [0, 1)) from the global generator; dtype as `randn`'s. */
export function rand(
  shape: readonly number[],
  options: TensorOptions & { low?: number; high?: number } = {},
): Tensor {
  checkShape(shape, "rand");
  const dtype = samplerDType("rand", options);
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
  return sampled(t, dtype, options);
}

/**
 * Integers uniform in [low, high) as an i32 tensor (PyTorch's `torch.randint`, also as
 * `randint(high, shape)`), from the global generator: the same after the same `manualSeed`, on
 * every device.
 *
 * @param args `low, high, shape, options?` or `high, shape, options?`; low and high integers with
 *   low < high in the int32 range (high up to 2^31); options: device (dtype must be i32 if given).
 * @returns A new i32 tensor of `shape`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { manualSeed, randint } from "../../mod.ts";
 * manualSeed(0);
 * const a = randint(10, [4]).toArray();
 * manualSeed(0);
 * assert.deepStrictEqual(randint(0, 10, [4]).toArray(), a);
 * assert.ok(a.every((v) => v >= 0 && v < 10));
 * ```
 */
export function randint(
  ...args:
    | [low: number, high: number, shape: readonly number[], options?: TensorOptions]
    | [high: number, shape: readonly number[], options?: TensorOptions]
): Tensor {
  const [low, high, shape, options = {}] = Array.isArray(args[1])
    ? [0, args[0] as number, args[1] as readonly number[], args[2] as TensorOptions | undefined]
    : args as [number, number, readonly number[], TensorOptions | undefined];
  if (!Array.isArray(shape)) {
    throw new TypeError(`randint: expected a shape array, got ${typeof shape}`);
  }
  checkShape(shape, "randint");
  checkRandintBounds("randint", low, high, 2 ** 32);
  if (low < -(2 ** 31) || high > 2 ** 31) {
    throw new RangeError(`randint: [${low}, ${high}) is outside the i32 range of its output`);
  }
  if (options.dtype !== undefined && options.dtype !== "i32") {
    throw new TypeError(`randint: dtrain's randint makes i32 tensors, not ${options.dtype}`);
  }
  const t = Tensor.empty([...shape], "i32", false, options.device);
  const n = t.numel(), dev = t.storage.backend;
  dev.check(
    dev.kernels.randint(t.ptr, n, BigInt(low), BigInt(high), randomSeed(), nextRandomOffset(n)),
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
