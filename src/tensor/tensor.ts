/**
 * The `Tensor`: a shaped, strided view of native memory, with the autograd fields. This file is the
 * surface; the arithmetic lives in ops/ (elementwise, matmul, reduce, shape, nn), and the backward
 * engine in autograd.ts.
 * @module
 */

import { type DType, isDTypeName, isFloat, itemSize } from "./dtype.ts";
import { type Device, Storage } from "./storage.ts";
import { track } from "./scope.ts";
import { backward, type BackwardOptions, type Node } from "./autograd.ts";
import * as inplace from "./inplace.ts";
import * as inplaceMath from "./ops/inplace_math.ts";
import { repr } from "./repr.ts";
import { contiguousStrides, formatShape, normalizeDim, shapeSize } from "./layout.ts";
import * as shapeOps from "./ops/shape.ts";
import { TensorShape } from "./tensor_shape.ts";

// The layout helpers, dtypes and `copyInto` have their own files; these re-exports keep the imports of
// the layers above (`from "../tensor/tensor.ts"`) working.
export {
  checkShape,
  contiguousStrides,
  formatShape,
  normalizeDim,
  sameShape,
  shapeSize,
} from "./layout.ts";
export { copyInto } from "./inplace.ts";
export { type DType, itemSize } from "./dtype.ts";

/** A hook run once a parameter's gradient for the current backward pass is complete. */
export type GradHook = (param: Tensor) => void;

/** Options accepted by every tensor-creating function. */
export interface TensorOptions {
  /** Element type; "f32" unless said otherwise. */
  dtype?: DType;
  /** Device; "cpu" unless said otherwise. */
  device?: Device;
  /** Whether autograd should record operations on it. */
  requiresGrad?: boolean;
}

/**
 * An n-dimensional array in native memory, with PyTorch's autograd semantics.
 *
 * @example Gradients of a small expression
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * const x = tensor([1, 2, 3], [3], { requiresGrad: true });
 * x.mul(x).sum().backward();
 * assert.deepStrictEqual(x.grad!.toArray(), new Float32Array([2, 4, 6]));
 * ```
 */
export class Tensor extends TensorShape implements Disposable {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Element steps between neighbours along each dimension. */
  readonly strides: readonly number[];
  /** Offset of the first element in the storage, in elements. */
  readonly offset: number;
  /** The element type. */
  readonly dtype: DType;
  /** The shared native memory. */
  readonly storage: Storage;
  /** Whether autograd records operations on this tensor. */
  requiresGrad = false;
  /** The accumulated gradient of a leaf after `backward()`; null before. */
  grad: Tensor | null = null;
  /** The node that made this tensor, for non-leaf tensors in a graph. */
  gradFn: Node | null = null;
  /** Parameters, gradients and optimizer state: never disposed by `tidy`. */
  persistent = false;
  /** Hooks run once this leaf's gradient is complete in a backward pass. */
  readonly postAccumulateGradHooks: GradHook[] = [];
  #ptr: Deno.PointerValue | undefined;
  #base: Deno.PointerValue = null;
  #disposed = false;

  /**
   * Wraps a storage (use the creation functions, such as `tensor` or `zeros`, instead).
   *
   * @param storage The native memory.
   * @param shape The dimensions.
   * @param dtype The element type.
   * @param strides The element strides (row-major when omitted).
   * @param offset The first element's offset in the storage.
   */
  constructor(
    storage: Storage,
    shape: readonly number[],
    dtype: DType,
    strides: readonly number[] = contiguousStrides(shape),
    offset = 0,
  ) {
    super();
    this.storage = storage;
    this.shape = shape;
    this.strides = strides;
    this.offset = offset;
    this.dtype = dtype;
    storage.retain();
    track(this);
  }

  /** Allocates an uninitialised (or zeroed) contiguous tensor on `device`. */
  static empty(
    shape: readonly number[],
    dtype: DType = "f32",
    zero = false,
    device: Device = "cpu",
  ): Tensor {
    const n = shapeSize(shape);
    if (!Number.isSafeInteger(n * itemSize(dtype))) {
      throw new RangeError(`tensor of shape ${formatShape(shape)} has too many elements (${n})`);
    }
    return new Tensor(new Storage(n * itemSize(dtype), zero, device), shape, dtype);
  }

  /**
   * A new uninitialised contiguous tensor (PyTorch's `new_empty`), of this tensor's dtype and
   * device unless `options` names others; `zero` fills it with zeros (PyTorch's `new_zeros`).
   */
  newEmpty(
    shape: readonly number[],
    options: { dtype?: DType; device?: Device; zero?: boolean } = {},
  ): Tensor {
    const { dtype = this.dtype, device = this.device, zero = false } = options;
    return Tensor.empty(shape, dtype, zero, device);
  }

  /**
   * A new tensor object over this tensor's memory with its own shape, strides and offset (and
   * dtype, of the same size, for `view(dtype)`), outside the autograd graph: how the view ops make
   * their results, each then recording its own node (users want `view`, `reshape`, `narrow` or
   * `detach`).
   */
  alias(
    shape: readonly number[] = this.shape,
    strides?: readonly number[],
    offset = this.offset,
    dtype: DType = this.dtype,
  ): Tensor {
    return new Tensor(this.storage, shape, dtype, strides, offset);
  }

  /** The device holding the data. */
  get device(): Device {
    return this.storage.device;
  }

  /** The number of dimensions. */
  get ndim(): number {
    return this.shape.length;
  }

  /** The number of elements. */
  numel(): number {
    return shapeSize(this.shape);
  }

  /** The size of dimension `dim` (negative counts from the end), or the whole shape. */
  size(): readonly number[];
  /** The size of dimension `dim` (negative counts from the end). */
  size(dim: number): number;
  size(dim?: number): number | readonly number[] {
    if (dim === undefined) return this.shape;
    return this.shape[normalizeDim(dim, this.ndim, "size")];
  }

  /** Whether the elements are laid out row-major without gaps. */
  isContiguous(): boolean {
    let step = 1;
    for (let d = this.shape.length - 1; d >= 0; d--) {
      if (this.shape[d] !== 1 && this.strides[d] !== step) return false;
      step *= this.shape[d];
    }
    return true;
  }

  /** Whether `dispose()` has run. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** The address of the first element; throws while a collective in flight owns the bytes. */
  get ptr(): Deno.PointerValue {
    const claim = this.storage.claimedBy;
    if (claim !== null) throw claim.refuse(`${this.dtype} ${formatShape(this.shape)}`);
    return this.collectivePtr;
  }

  /**
   * `ptr` unchecked (see [Note: collectives own their tensors] in storage.ts): a collective takes
   * it when issued, ordered behind those in flight.
   * @ignore dtrain-internal
   */
  get collectivePtr(): Deno.PointerValue {
    // Keyed on the storage's address: FSDP frees and re-allocates a storage under its tensors.
    if (this.#ptr !== undefined && this.#base === this.storage.ptr) return this.#ptr;
    if (this.#disposed || this.storage.ptr === null) {
      throw new ReferenceError(`tensor ${formatShape(this.shape)} ${this.dtype} was disposed`);
    }
    this.#base = this.storage.ptr;
    this.#ptr = this.offset === 0
      ? this.storage.ptr
      : this.storage.pointerAt(this.offset * itemSize(this.dtype));
    return this.#ptr;
  }

  /** Frees this tensor's hold on its memory now; later use throws. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#ptr = undefined;
    this.storage.release();
  }

  /** `using t = ...` disposes at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Sets `requiresGrad` in place and returns this tensor (PyTorch's `requires_grad_`). */
  requiresGrad_(value = true): this {
    if (value && !isFloat(this.dtype)) {
      throw new TypeError(
        `requiresGrad: only floating-point tensors (f32, bf16, f16) can require gradients, not ${this.dtype}`,
      );
    }
    this.requiresGrad = value;
    return this;
  }

  /**
   * Registers a hook run once this leaf's gradient is fully accumulated in a backward pass
   * (PyTorch's `register_post_accumulate_grad_hook`). Returns a function that removes it.
   */
  registerPostAccumulateGradHook(hook: GradHook): () => void {
    if (!this.requiresGrad || this.gradFn !== null) {
      throw new Error(
        "registerPostAccumulateGradHook: only leaf tensors that require grad have it",
      );
    }
    this.postAccumulateGradHooks.push(hook);
    return () => {
      const i = this.postAccumulateGradHooks.indexOf(hook);
      if (i >= 0) this.postAccumulateGradHooks.splice(i, 1);
    };
  }

  /** Whether this tensor is a leaf of the autograd graph. */
  get isLeaf(): boolean {
    return this.gradFn === null;
  }

  // ---------------------------------------------------------------- autograd

  /** Computes gradients of this tensor w.r.t. the graph's leaves (see `autograd.backward`). */
  backward(gradient?: Tensor, options?: BackwardOptions): void {
    backward(this, gradient, options);
  }

  /** A tensor sharing this one's memory, cut from the graph. */
  detach(): Tensor {
    return shapeOps.detach(this);
  }

  /** A contiguous copy that stays in the graph. */
  clone(): Tensor {
    return shapeOps.clone(this);
  }

  /**
   * A contiguous tensor with these elements: a new view of the same memory when already
   * contiguous (disposing it leaves this tensor alive), else a copy.
   */
  contiguous(): Tensor {
    const c = shapeOps.contiguous(this);
    return c === this ? shapeOps.identity(this) : c;
  }

  /**
   * This tensor converted to a dtype (`"f32"`, `"bf16"`, `"f16"`, `"i32"`, `"bool"`; u16 to any)
   * or moved to a device (`"cpu"`, or any registered one; the move stays in the graph): a copy,
   * or a new view when nothing changes.
   */
  to(target: DType | Device): Tensor {
    const c = isDTypeName(target)
      ? shapeOps.to(this, target as DType)
      : shapeOps.toDevice(this, target);
    return c === this ? shapeOps.identity(this) : c;
  }

  // ---------------------------------------------------------------- in place (no autograd)

  /** Fills with `value` in place. */
  fill_(value: number): this {
    inplace.fill(this, value);
    return this;
  }

  /** Fills with zeros in place. */
  zero_(): this {
    return this.fill_(0);
  }

  /** Copies `src`'s elements into this tensor (broadcast to its shape, converted to its dtype, any device). */
  copy_(src: Tensor): this {
    inplaceMath.copy(this, src);
    return this;
  }

  /** this += alpha * other, in place (other broadcast to this shape, or a number). */
  add_(other: Tensor | number, alpha = 1): this {
    inplaceMath.arith("add", this, other, alpha);
    return this;
  }

  /** this *= other, in place (other broadcast to this shape, or a number). */
  mul_(other: Tensor | number): this {
    inplaceMath.arith("mul", this, other);
    return this;
  }

  /** Formats like PyTorch's repr: `tensor([[1., 2.], [3., 4.]], requiresGrad=True)` (see repr.ts). */
  override toString(): string {
    return repr(this);
  }
}
