/**
 * Placements (PyTorch's `Shard(dim)` and `Replicate()`) and the record of how each parameter is
 * placed. dtrain has no DTensor: a tensor-parallel parameter is a plain Parameter holding this
 * rank's shard, and activations are plain local tensors; placements say how a module boundary
 * redistributes them, and {@linkcode tensorParallelPlacement} tells what a parameter holds.
 * @module
 */

import type { ProcessGroup } from "../../distributed/process_group.ts";
import type { Tensor } from "../../tensor/tensor.ts";

/** Split along `dim` in equal chunks, rank r holding chunk r (PyTorch's `Shard`). */
export class Shard {
  /** The dimension split; negative counts from the end. */
  readonly dim: number;
  /**
   * Creates a placement.
   *
   * @param dim The dimension split; negative counts from the end.
   */
  constructor(dim: number) {
    if (!Number.isInteger(dim)) throw new RangeError(`Shard: dim must be an integer, got ${dim}`);
    this.dim = dim;
  }
  /** `Shard(dim=1)`, as PyTorch prints it. */
  toString(): string {
    return `Shard(dim=${this.dim})`;
  }
}

/** The whole tensor on every rank (PyTorch's `Replicate`). */
export class Replicate {
  /** `Replicate()`. */
  toString(): string {
    return "Replicate()";
  }
}

/** Where a tensor's values are across the tensor-parallel group. */
export type Placement = Shard | Replicate;

/**
 * Whether two placements are the same (Shard dims compared after resolving negatives).
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function samePlacement(a: Placement, b: Placement, ndim: number): boolean {
  if (a instanceof Replicate || b instanceof Replicate) {
    return a instanceof Replicate && b instanceof Replicate;
  }
  const norm = (d: number) => (d < 0 ? d + ndim : d);
  return norm(a.dim) === norm(b.dim);
}

/** What a tensor-parallel parameter holds (see {@linkcode tensorParallelPlacement}). */
export interface ParamPlacement {
  /** How the full parameter is split (Replicate: every rank holds all of it). */
  placement: Placement;
  /** The full parameter's shape. */
  fullShape: readonly number[];
  /**
   * The parameter's dim-`placement.dim` length was cut into this many equal parts (q, k and v of
   * a fused projection: 3) before each part was split; 1 for a plain split.
   */
  chunks: number;
  /** The tensor-parallel group. */
  group: ProcessGroup;
}

const placements = new WeakMap<Tensor, ParamPlacement>();

/**
 * Records what `param` holds (called by the parallel styles).
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function setParamPlacement(param: Tensor, placement: ParamPlacement): void {
  placements.set(param, placement);
}

/**
 * How a parameter is placed by `parallelizeModule`: its placement, the full shape, the chunk
 * count (3 for a fused q|k|v projection) and the group; undefined for a parameter no parallel
 * style placed.
 *
 * @param param A module's parameter.
 */
export function tensorParallelPlacement(param: Tensor): ParamPlacement | undefined {
  return placements.get(param);
}

/**
 * The ranges of the full parameter's dim `placement.dim` that rank `rank` holds, in order: one
 * range for a plain split, `chunks` for a fused one (rank r holds part r of each chunk).
 *
 * @param length The full parameter's length along the split dimension.
 * @param chunks The number of fused parts.
 * @param rank This rank in the tensor-parallel group.
 * @param size The group's size.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function shardRanges(
  length: number,
  chunks: number,
  rank: number,
  size: number,
): { start: number; length: number }[] {
  const chunk = length / chunks, part = chunk / size;
  return Array.from(
    { length: chunks },
    (_, c) => ({ start: c * chunk + rank * part, length: part }),
  );
}
