/**
 * One parameter under FSDP (FSDP2's `_fsdp_param.py`): its shard, a view into the group's flat
 * shard buffer that the optimizer trains, and its full ("unsharded") parameter, whose memory
 * exists only while the group is unsharded.
 *
 * [Note: freeing the full parameters]
 * The autograd nodes recorded in forward keep the full parameter (and views of it) to read in
 * backward. FSDP2 frees the memory under them without touching the tensors
 * (`storage.resize_(0)`) and re-allocates it before the group's backward; dtrain does the same
 * with the storage's block (`Tensor.ptr` follows the storage's current address). So the tensor
 * objects, their gradient hooks and the graph's references live for the whole run, and only the
 * bytes come and go.
 * @module
 */

import type { Module } from "../../nn/module.ts";
import { itemSize } from "../../tensor/dtype.ts";
import { Parameter } from "../../nn/parameter.ts";
import type { Storage } from "../../tensor/storage.ts";
import { contiguousStrides, Tensor } from "../../tensor/tensor.ts";
import type { PrecisionDtype } from "../mixed_precision.ts";
import { type ShardLayout, shardLayout } from "./_common.ts";

/** A module attribute that holds the parameter (more than one when it is shared). */
export interface ParamOwner {
  /** The module. */
  module: Module;
  /** Its property name. */
  key: string;
}

/** A parameter's shard and full parameter. */
export class FSDPParam {
  /** The parameter's name relative to the module `fullyShard` was called on. */
  readonly fqn: string;
  /** The full parameter's shape. */
  readonly shape: readonly number[];
  /** How dim 0 is cut across the ranks. */
  readonly layout: ShardLayout;
  /** Offset of this parameter's padded shard in its group's flat shard buffer, in elements. */
  readonly offset: number;
  /** This rank's rows: what the module holds while sharded and what the optimizer trains. */
  readonly sharded: Parameter;
  /**
   * The full parameter, a leaf of the autograd graph while the group is unsharded, in the
   * policy's `paramDtype` (see [Note: mixed precision] in ../mixed_precision.ts).
   */
  readonly unsharded: Parameter;
  /** Where the module holds the parameter. */
  readonly owners: readonly ParamOwner[];
  /** This rank's place among the ranks holding the same rows (HSDP's replicas; 0 without). */
  replicaRank = 0;

  /**
   * Copies this rank's rows of `original` into `flat` at `offset` and makes the shard a view of
   * them; the full parameter will be `paramDtype`.
   */
  constructor(
    fqn: string,
    original: Parameter,
    owners: readonly ParamOwner[],
    flat: Tensor,
    offset: number,
    rank: number,
    size: number,
    paramDtype: PrecisionDtype = "f32",
  ) {
    this.fqn = fqn;
    this.shape = original.shape;
    this.owners = owners;
    this.offset = offset;
    this.layout = shardLayout(original.shape, rank, size);
    const { rowNumel, shardRows, localRows } = this.layout;
    const shardShape = original.shape.length === 0
      ? [localRows]
      : [localRows, ...original.shape.slice(1)];
    const view = new Tensor(flat.storage, shardShape, "f32", contiguousStrides(shardShape), offset);
    this.sharded = new Parameter(view, original.requiresGrad);
    view.dispose();
    const src = original.contiguous();
    copyElements(this.sharded, 0, src, rank * shardRows * rowNumel, localRows * rowNumel);
    src.dispose();
    const full = Tensor.empty(original.shape, paramDtype, false, flat.device);
    this.unsharded = new Parameter(full, original.requiresGrad);
    full.dispose();
    freeStorage(this.unsharded.storage);
  }

  /** Points every owning attribute at the full parameter (true) or at the shard (false). */
  expose(unsharded: boolean): void {
    const param = unsharded ? this.unsharded : this.sharded;
    for (const { module, key } of this.owners) {
      (module as unknown as Record<string, unknown>)[key] = param;
    }
  }

  /** Allocates the full parameter's memory (uninitialised) if it is freed. */
  allocUnsharded(): void {
    this.unsharded.storage.reallocate();
  }

  /** Frees the full parameter's memory (see [Note: freeing the full parameters]). */
  freeUnsharded(): void {
    freeStorage(this.unsharded.storage);
  }
}

function freeStorage(s: Storage): void {
  s.freeBlock();
}

/** Copies `count` elements from `src` (at element `srcAt`) to `dst` (at `dstAt`), one dtype. */
export function copyElements(
  dst: Tensor,
  dstAt: number,
  src: Tensor,
  srcAt: number,
  count: number,
): void {
  if (count <= 0) return;
  if (dst.dtype !== src.dtype) {
    throw new Error(`FSDP: copying ${src.dtype} elements into a ${dst.dtype} tensor`);
  }
  dst.storage.backend.copy(at(dst, dstAt), at(src, srcAt), count * itemSize(dst.dtype));
}

/** y[yAt..] += x[xAt..] over `count` f32 elements. */
export function addElements(y: Tensor, yAt: number, x: Tensor, xAt: number, count: number): void {
  if (count <= 0) return;
  const dev = y.storage.backend;
  dev.check(dev.kernels.axpy(at(y, yAt), at(x, xAt), count, 1));
}

function at(t: Tensor, elements: number): Deno.PointerValue {
  return elements === 0 ? t.ptr : Deno.UnsafePointer.offset(t.ptr!, elements * itemSize(t.dtype));
}
