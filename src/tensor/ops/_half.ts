/**
 * How the float ops compute on the 2-byte floats (bf16, f16) and how they meet autocast: one
 * entry, {@linkcode viaF32}, that every compute op calls before its f32 path.
 *
 * [Note: half compute]
 * PyTorch's CPU kernels for bfloat16 and float16 load each element as a float, compute in float
 * and round each op's output once. dtrain does the same with its f32 kernels: an op given a half
 * tensor upcasts it with the differentiable `to()` (lossless), runs its f32 path, and rounds the
 * result to the result dtype with `to()`. Gradients flow back through both casts, so the
 * gradient of a bf16 input is bf16, rounded once per op, as PyTorch's. The result dtype is
 * PyTorch's type promotion ({@linkcode resultType}). The f32 copies a recorded graph reads stay
 * alive with the graph (freed by tidy or the GC, like any graph intermediate); when nothing is
 * recorded they are freed at once.
 * @module
 */

import { bf16Bits, bf16Value, type DType, type HalfDType, isFloat, isHalf } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";
import { autocastInputs, withoutAutocast } from "../autocast_state.ts";
import { to } from "./shape.ts";
import { DTypeCode } from "../device/device.ts";

/** An op's optional tensor argument. */
type Arg = Tensor | null | undefined;

const CATEGORY: Record<DType, number> = { bool: 0, i32: 1, u16: 1, f32: 2, bf16: 2, f16: 2 };

/** Two dtypes of one priority group promoted (bf16 with f16, or a half with f32, is f32). */
function promotePair(a: DType | undefined, b: DType): DType {
  if (a === undefined || a === b) return b;
  if (CATEGORY[a] !== CATEGORY[b]) return CATEGORY[a] > CATEGORY[b] ? a : b;
  return CATEGORY[a] === 2 ? "f32" : "i32";
}

/** PyTorch's combine_categories: a higher-priority group's dtype wins unless it is of a lower kind. */
function combine(higher: DType | undefined, lower: DType | undefined): DType | undefined {
  if (higher === undefined) return lower;
  if (lower === undefined || CATEGORY[higher] === 2) return higher;
  if (higher === "bool" || CATEGORY[lower] === 2) return promotePair(higher, lower);
  return higher;
}

/**
 * The dtype of an op's result over tensors and numbers, as PyTorch's `torch.result_type`:
 * tensors with dimensions outrank 0-d tensors, which outrank numbers, unless the lower group is
 * of a higher kind (bool < integer < float). So bf16 with bf16 is bf16, bf16 with f16 or an f32
 * tensor is f32, a half with a 0-d f32 tensor, a number or an integer tensor stays the half.
 *
 * @param operands The op's operands (null and undefined are skipped).
 * @returns The result dtype.
 */
export function resultType(...operands: (Arg | number)[]): DType {
  let dims: DType | undefined, zeroDim: DType | undefined, numbers: DType | undefined;
  for (const o of operands) {
    if (o === null || o === undefined) continue;
    if (typeof o === "number") numbers = promotePair(numbers, Number.isInteger(o) ? "i32" : "f32");
    else if (o.ndim === 0) zeroDim = promotePair(zeroDim, o.dtype);
    else dims = promotePair(dims, o.dtype);
  }
  return combine(dims, combine(zeroDim, numbers)) ?? "f32";
}

/** Whether any of the tensors is bf16 or f16. */
export function anyHalf(...tensors: Arg[]): boolean {
  return tensors.some((t) => t !== null && t !== undefined && isHalf(t.dtype));
}

/**
 * Runs a float op on 2-byte floats (see [Note: half compute]) and applies autocast's policy for
 * `op` (see [Note: autocast] in autocast_state.ts). Returns null when there is nothing to do:
 * every float input is f32 and autocast leaves the op alone, so the caller's f32 path runs.
 *
 * @param op The op's name, as autocast's lists name it.
 * @param inputs The op's tensor arguments, in `fn`'s order (floats are cast, others pass as is).
 * @param fn The op itself, called with f32 tensors in place of the half ones.
 * @param dtype The result dtype; PyTorch's promotion of the float inputs when absent.
 * @param savesOutput Whether `fn`'s backward reads its (contiguous) output, as tanh's and
 * softmax's do: the saved f32 output then takes the rounded values, since PyTorch's backward
 * reads the rounded output it returned.
 * @param bf16 The op's own path for operands that are all bf16 (after autocast's casts), such
 * as linear's through the bf16 product kernel: taken in place of the f32 path when given.
 * @returns The result in its dtype, or null.
 */
export function viaF32<A extends Arg[]>(
  op: string,
  inputs: [...A],
  fn: (...xs: A) => Tensor,
  dtype?: (cast: A) => DType,
  savesOutput = false,
  bf16?: (...xs: A) => Tensor,
): Tensor | null {
  const { args, made } = autocastInputs(op, inputs);
  if (bf16 && args.every((t) => !t || t.dtype === "bf16")) {
    return finish(withoutAutocast(() => bf16(...(args as A))), made);
  }
  if (!anyHalf(...args)) {
    if (made.length === 0) return null;
    // Autocast cast half inputs up: the f32 path on the casts.
    return finish(withoutAutocast(() => fn(...(args as A))), made);
  }
  const want = dtype?.(args as A) ?? resultType(...args.filter((t) => t && isFloat(t.dtype)));
  const wide = args.map((t) => (t && isHalf(t.dtype) ? to(t, "f32") : t));
  const copies = wide.filter((t, i) => t !== args[i]) as Tensor[];
  let out: Tensor;
  try {
    out = withoutAutocast(() => fn(...(wide as A)));
  } catch (e) {
    if (!anyRecorded(copies)) { for (const t of [...copies, ...made]) t.dispose(); }
    throw e;
  }
  const result = to(out, want);
  if (savesOutput && out !== result && out.gradFn !== null && isHalf(result.dtype)) {
    const dev = out.storage.backend;
    dev.check(
      dev.kernels.castHalfF32(result.ptr, DTypeCode[result.dtype], out.ptr, out.numel()),
    );
  }
  const temps = out === result || wide.includes(out) ? copies : [...copies, out];
  return finish(result, [...temps, ...made]);
}

/** Frees the op's temporaries when no graph holds them; returns `result`. */
function finish(result: Tensor, temps: Tensor[]): Tensor {
  if (result.gradFn === null) { for (const t of temps) if (t !== result) t.dispose(); }
  return result;
}

function anyRecorded(ts: Tensor[]): boolean {
  return ts.some((t) => t.gradFn !== null);
}

/**
 * `value` rounded to `dtype` (through f32, to nearest even, as `to()`): PyTorch rounds a number
 * to a half tensor's dtype where it becomes an operand of that dtype (`x + 0.3`, `x == 0.1`,
 * `x ** 3.3`), and keeps it in float where the kernel takes it so (`x * 0.1`, `x / 0.3`).
 */
export function roundToHalf(value: number, dtype: HalfDType): number {
  return dtype === "f16" ? Math.f16round(value) : bf16Value(bf16Bits(value));
}
