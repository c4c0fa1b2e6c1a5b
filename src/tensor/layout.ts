/**
 * Shapes and strides: sizes, row-major strides, checks, equality, broadcasting and formatting.
 * Pure functions on number arrays, shared by the tensor, its ops and the layers above.
 * @module
 */

/**
 * Row-major strides of a shape, in elements.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { contiguousStrides } from "./layout.ts";
 * assert.deepStrictEqual(contiguousStrides([2, 3, 4]), [12, 4, 1]);
 * ```
 */
export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = step;
    step *= shape[d];
  }
  return strides;
}

/**
 * The number of elements of a shape (1 for a scalar's `[]`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { shapeSize } from "./layout.ts";
 * assert.deepStrictEqual(shapeSize([64, 784]), 50176);
 * assert.deepStrictEqual(shapeSize([]), 1);
 * ```
 */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * Whether two shapes are equal: the one shape comparison of dtrain.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { sameShape } from "./layout.ts";
 * assert.deepStrictEqual(sameShape([2, 3], [2, 3]), true);
 * assert.deepStrictEqual(sameShape([6], [2, 3]), false);
 * ```
 */
export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Checks that every dimension is a non-negative integer; names the caller and the shape. */
export function checkShape(shape: readonly number[], what: string): void {
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) {
      throw new RangeError(`${what}: invalid shape [${shape.join(", ")}]`);
    }
  }
}

/**
 * Formats a shape for error messages.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { formatShape } from "./layout.ts";
 * assert.deepStrictEqual(formatShape([64, 784]), "[64, 784]");
 * ```
 */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/** Resolves a possibly negative dimension index; names the op and the rank on error. */
export function normalizeDim(dim: number, ndim: number, op: string): number {
  const d = dim < 0 ? dim + Math.max(ndim, 1) : dim;
  if (!Number.isInteger(dim) || d < 0 || d >= Math.max(ndim, 1)) {
    throw new RangeError(`${op}: dimension ${dim} is out of range for a ${ndim}-d tensor`);
  }
  return d;
}

/** The broadcast shape of a and b (numpy rules), or an error naming both. */
export function broadcastShapes(op: string, a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1, db = b[b.length - n + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new RangeError(
        `${op}: shapes ${formatShape(a)} and ${formatShape(b)} cannot be broadcast together`,
      );
    }
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** Whether `small` only repeats over leading dimensions of `shape` (the kernels' fast path). */
export function isSuffix(small: readonly number[], shape: readonly number[]): boolean {
  const lead = shape.length - small.length;
  let i = 0;
  while (i < small.length && small[i] === 1) i++;
  return small.slice(i).every((d, j) => d === shape[lead + i + j]);
}
