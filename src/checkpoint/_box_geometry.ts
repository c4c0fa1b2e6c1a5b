/**
 * The arithmetic of boxes (N-D blocks of a full tensor, see [Note: boxes] in _boxes.ts): their
 * shapes, sizes and overlaps, apart from tensors, so that a checkpoint's background writer loads
 * no tensor code.
 * @module
 */

/** A block of the full tensor: `start` and `length` per dimension. */
export interface Box {
  /** The first index held, per dimension. */
  start: number[];
  /** How many indices are held, per dimension (all positive). */
  length: number[];
}

/** A box of the full tensor and where it sits in the rank's local tensor. */
export interface LocalBox extends Box {
  /** The box's first index in the local tensor, per dimension. */
  at: number[];
}

/** `shape`, a 0-d one promoted to [1] (see [Note: boxes]). */
export function boxShape(shape: readonly number[]): number[] {
  return shape.length === 0 ? [1] : [...shape];
}

/** The one box of a whole tensor of `shape`, at the local origin. */
export function wholeBox(shape: readonly number[]): LocalBox {
  const full = boxShape(shape);
  return { start: full.map(() => 0), length: full, at: full.map(() => 0) };
}

/** The number of elements in `box`. */
export function volume(box: Box): number {
  return box.length.reduce((a, b) => a * b, 1);
}

/** The overlap of two boxes, or null when they do not meet. */
export function intersect(a: Box, b: Box): Box | null {
  const start: number[] = [], length: number[] = [];
  for (let d = 0; d < a.start.length; d++) {
    const lo = Math.max(a.start[d], b.start[d]);
    const hi = Math.min(a.start[d] + a.length[d], b.start[d] + b.length[d]);
    if (lo >= hi) return null;
    start.push(lo);
    length.push(hi - lo);
  }
  return { start, length };
}
