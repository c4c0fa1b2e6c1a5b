/**
 * The `Tensor`: a shaped, strided view of native memory, with the autograd fields. This file is the
 * surface; the arithmetic lives in ops/ (elementwise, matmul, reduce, shape, nn), and the backward
 * engine in autograd.ts.
 * @module
 */

import { lib, UnaryOp } from "../../ffi/dtrain.ts";
import { type Device, Storage } from "./storage.ts";
import { track } from "./scope.ts";
import { backward, type BackwardOptions, isGradEnabled, type Node } from "./autograd.ts";
import * as elementwise from "./ops/elementwise.ts";
import { matmul as matmulOp } from "./ops/matmul.ts";
import * as nnOps from "./ops/nn.ts";
import * as reduceOps from "./ops/reduce.ts";
import * as shapeOps from "./ops/shape.ts";
import { unwrap } from "./native.ts";

/** Element types: 32-bit float and 32-bit signed integer. */
export type DType = "f32" | "i32";

/** A hook run once a parameter's gradient for the current backward pass is complete. */
export type GradHook = (param: Tensor) => void;

const registry = new FinalizationRegistry<Storage>((storage) => storage.release());

/** Row-major strides of a shape, in elements. */
export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = step;
    step *= shape[d];
  }
  return strides;
}

/** The number of elements of a shape. */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Checks that every dimension is a non-negative integer; names the caller and the shape. */
export function checkShape(shape: readonly number[], what: string): void {
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) {
      throw new RangeError(`${what}: invalid shape [${shape.join(", ")}]`);
    }
  }
}

/** Formats a shape for error messages: `[64, 784]`. */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

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
 * import { tensor } from "../../mod.ts";
 * const x = tensor([1, 2, 3], [3], { requiresGrad: true });
 * x.mul(x).sum().backward();
 * x.grad!.toArray(); // Float32Array [2, 4, 6]
 * ```
 */
export class Tensor implements Disposable {
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
    this.storage = storage;
    this.shape = shape;
    this.strides = strides;
    this.offset = offset;
    this.dtype = dtype;
    storage.retain();
    registry.register(this, storage, this);
    track(this);
  }

  /** Allocates an uninitialised (or zeroed) contiguous tensor. */
  static empty(
    shape: readonly number[],
    dtype: DType = "f32",
    zero = false,
    device: Device = "cpu",
  ): Tensor {
    const n = shapeSize(shape);
    if (!Number.isSafeInteger(n * 4)) {
      throw new RangeError(`tensor of shape ${formatShape(shape)} has too many elements (${n})`);
    }
    return new Tensor(new Storage(n * 4, zero, device), shape, dtype);
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

  /** The address of the first element (for kernels and collectives). */
  get ptr(): Deno.PointerValue {
    if (this.#ptr !== undefined) return this.#ptr;
    if (this.#disposed || this.storage.ptr === null) {
      throw new ReferenceError(`tensor ${formatShape(this.shape)} ${this.dtype} was disposed`);
    }
    this.#ptr = this.offset === 0
      ? this.storage.ptr
      : Deno.UnsafePointer.offset(this.storage.ptr!, this.offset * 4);
    return this.#ptr;
  }

  /** A copy of the elements, row-major. */
  toArray(): Float32Array | Int32Array {
    const src = this.isContiguous() ? this : this.contiguous();
    const n = src.numel();
    const out = this.dtype === "f32" ? new Float32Array(n) : new Int32Array(n);
    if (n > 0) new Deno.UnsafePointerView(src.ptr!).copyInto(out);
    if (src !== this) src.dispose();
    return out;
  }

  /** The value of a one-element tensor. */
  item(): number {
    if (this.numel() !== 1) {
      throw new RangeError(
        `item(): tensor ${formatShape(this.shape)} has ${this.numel()} elements, not 1`,
      );
    }
    const view = new Deno.UnsafePointerView(this.ptr!);
    return this.dtype === "f32" ? view.getFloat32() : view.getInt32();
  }

  /** Nested arrays of the elements, like PyTorch's `tolist()`. */
  tolist(): number | unknown[] {
    const flat = Array.from(this.toArray());
    if (this.ndim === 0) return flat[0];
    const build = (dim: number, start: number): unknown[] => {
      const out: unknown[] = [];
      const step = shapeSize(this.shape.slice(dim + 1));
      for (let i = 0; i < this.shape[dim]; i++) {
        out.push(dim === this.ndim - 1 ? flat[start + i] : build(dim + 1, start + i * step));
      }
      return out;
    };
    return build(0, 0);
  }

  /** Frees this tensor's hold on its memory now; later use throws. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#ptr = undefined;
    registry.unregister(this);
    this.storage.release();
  }

  /** `using t = ...` disposes at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Sets `requiresGrad` in place and returns this tensor (PyTorch's `requires_grad_`). */
  requiresGrad_(value = true): this {
    if (value && this.dtype !== "f32") {
      throw new TypeError(
        `requiresGrad: only f32 tensors can require gradients, not ${this.dtype}`,
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

  // ---------------------------------------------------------------- arithmetic

  /** this + other, broadcasting. */
  add(other: Tensor | number): Tensor {
    return elementwise.add(this, other);
  }

  /** this - other, broadcasting. */
  sub(other: Tensor | number): Tensor {
    return elementwise.sub(this, other);
  }

  /** this * other, broadcasting. */
  mul(other: Tensor | number): Tensor {
    return elementwise.mul(this, other);
  }

  /** this / other, broadcasting. */
  div(other: Tensor | number): Tensor {
    return elementwise.div(this, other);
  }

  /** Matrix product (see `matmul`). */
  matmul(other: Tensor): Tensor {
    return matmulOp(this, other);
  }

  /** max(x, 0). */
  relu(): Tensor {
    return elementwise.relu(this);
  }

  /** GELU (exact by default, or approximate "tanh"). */
  gelu(approximate: "none" | "tanh" = "none"): Tensor {
    return elementwise.gelu(this, approximate);
  }

  /** e^x. */
  exp(): Tensor {
    return elementwise.exp(this);
  }

  /** Natural logarithm. */
  log(): Tensor {
    return elementwise.log(this);
  }

  /** Hyperbolic tangent. */
  tanh(): Tensor {
    return elementwise.tanh(this);
  }

  /** Logistic sigmoid. */
  sigmoid(): Tensor {
    return elementwise.sigmoid(this);
  }

  /** -x. */
  neg(): Tensor {
    return elementwise.neg(this);
  }

  /** Square root. */
  sqrt(): Tensor {
    return elementwise.sqrt(this);
  }

  /** x ** exponent. */
  pow(exponent: number): Tensor {
    return elementwise.pow(this, exponent);
  }

  /** Sum of all elements, or over `dim`. */
  sum(dim?: number, keepdim = false): Tensor {
    return reduceOps.sum(this, dim, keepdim);
  }

  /** Mean of all elements, or over `dim`. */
  mean(dim?: number, keepdim = false): Tensor {
    return reduceOps.mean(this, dim, keepdim);
  }

  /** Indices of the maxima along the last dimension (i32). */
  argmax(dim = -1): Tensor {
    return reduceOps.argmax(this, dim);
  }

  /** Softmax over the last dimension. */
  softmax(dim = -1): Tensor {
    return nnOps.softmax(this, dim);
  }

  /** Log-softmax over the last dimension. */
  logSoftmax(dim = -1): Tensor {
    return nnOps.logSoftmax(this, dim);
  }

  // ---------------------------------------------------------------- shape

  /** The same elements in a new shape (one dimension may be -1); a view when possible. */
  reshape(...shape: number[] | [readonly number[]]): Tensor {
    const dims = (Array.isArray(shape[0]) ? shape[0] : shape) as readonly number[];
    return shapeOps.reshape(this, dims);
  }

  /**
   * The same memory in a new shape (one dimension may be -1). Like PyTorch's `view`, it never
   * copies: a tensor whose layout cannot be viewed so (a transposed one) throws; use `reshape`.
   */
  view(...shape: number[] | [readonly number[]]): Tensor {
    if (!this.isContiguous()) {
      throw new RangeError(
        `view: shape ${formatShape(this.shape)} with strides ${formatShape(this.strides)} is not ` +
          `compatible with a view; use .reshape(...) instead`,
      );
    }
    return this.reshape(...shape);
  }

  /** Flattens dimensions `startDim`..`endDim` into one. */
  flatten(startDim = 0, endDim = -1): Tensor {
    if (this.ndim === 0) return this.reshape([1]);
    const s = normalizeDim(startDim, this.ndim, "flatten"),
      e = normalizeDim(endDim, this.ndim, "flatten");
    const middle = shapeSize(this.shape.slice(s, e + 1));
    return this.reshape([...this.shape.slice(0, s), middle, ...this.shape.slice(e + 1)]);
  }

  /** A view with two dimensions swapped. */
  transpose(dim0: number, dim1: number): Tensor {
    return shapeOps.transpose(this, dim0, dim1);
  }

  /** The transpose of a 2-d tensor (a view). */
  t(): Tensor {
    if (this.ndim > 2) {
      throw new RangeError(`t(): expects a tensor with <= 2 dimensions, got ${this.ndim}`);
    }
    return this.ndim < 2 ? shapeOps.identity(this) : this.transpose(0, 1);
  }

  /** The transpose of a 2-d tensor (PyTorch's `.T`). */
  get T(): Tensor {
    return this.t();
  }

  /** A broadcast view to `shape`. */
  expand(...shape: number[]): Tensor {
    return shapeOps.expand(this, shape);
  }

  /**
   * A contiguous tensor with these elements: a new view of the same memory when already
   * contiguous (disposing it leaves this tensor alive), else a copy.
   */
  contiguous(): Tensor {
    const c = shapeOps.contiguous(this);
    return c === this ? shapeOps.identity(this) : c;
  }

  /** This tensor converted to `dtype`: a copy, or a new view when it already has that dtype. */
  to(dtype: DType): Tensor {
    const c = shapeOps.to(this, dtype);
    return c === this ? shapeOps.identity(this) : c;
  }

  // ---------------------------------------------------------------- in place (no autograd)

  #checkInPlace(op: string): void {
    if (this.requiresGrad && isGradEnabled()) {
      throw new Error(
        `${op}: a tensor that requires grad is used in an in-place operation; wrap it in noGrad()`,
      );
    }
    if (!this.isContiguous()) {
      throw new Error(`${op}: in-place operations need a contiguous tensor`);
    }
    this.storage.version++;
  }

  /** Fills with `value` in place. */
  fill_(value: number): this {
    this.#checkInPlace("fill_");
    unwrap(
      this.dtype === "f32"
        ? lib.dt_fill_f32(this.ptr, this.numel(), value)
        : lib.dt_fill_i32(this.ptr, this.numel(), value),
    );
    return this;
  }

  /** Fills with zeros in place. */
  zero_(): this {
    return this.fill_(0);
  }

  /** Copies `src`'s elements (same shape and dtype) into this tensor. */
  copy_(src: Tensor): this {
    this.#checkInPlace("copy_");
    if (src.dtype !== this.dtype || src.shape.join() !== this.shape.join()) {
      throw new RangeError(
        `copy_: source ${src.dtype} ${formatShape(src.shape)} does not match ${this.dtype} ${
          formatShape(this.shape)
        }`,
      );
    }
    copyInto(this, src);
    return this;
  }

  /** this += alpha * other, in place (f32, same shape). */
  add_(other: Tensor, alpha = 1): this {
    this.#checkInPlace("add_");
    if (other.dtype !== "f32" || this.dtype !== "f32" || other.shape.join() !== this.shape.join()) {
      throw new RangeError(
        `add_: ${other.dtype} ${formatShape(other.shape)} does not match ${this.dtype} ${
          formatShape(this.shape)
        }`,
      );
    }
    const src = other.isContiguous() ? other : shapeOps.contiguous(other.detach());
    unwrap(lib.dt_axpy(this.ptr, src.ptr, this.numel(), alpha));
    if (src !== other) src.dispose();
    return this;
  }

  /** this *= value, in place (f32). */
  mul_(value: number): this {
    if (this.dtype !== "f32") {
      throw new TypeError(`mul_: expected an f32 tensor, got ${this.dtype}`);
    }
    this.#checkInPlace("mul_");
    unwrap(lib.dt_unary(UnaryOp.scale, this.ptr, this.ptr, this.numel(), value));
    return this;
  }

  /** Formats like PyTorch: `tensor([[1, 2], [3, 4]], dtype=f32)`. */
  toString(): string {
    const n = this.numel();
    const body = n <= 64 ? JSON.stringify(this.tolist()) : `<${n} elements>`;
    return `tensor(${body}, shape=${formatShape(this.shape)}, dtype=${this.dtype})`;
  }
}

/** Resolves a possibly negative dimension index; names the op and the rank on error. */
export function normalizeDim(dim: number, ndim: number, op: string): number {
  const d = dim < 0 ? dim + Math.max(ndim, 1) : dim;
  if (!Number.isInteger(dim) || d < 0 || d >= Math.max(ndim, 1)) {
    throw new RangeError(`${op}: dimension ${dim} is out of range for a ${ndim}-d tensor`);
  }
  return d;
}

/** Copies `src`'s elements into contiguous `dst` (same shape and dtype). */
export function copyInto(dst: Tensor, src: Tensor): void {
  if (src.isContiguous()) {
    unwrap(lib.dt_copy(dst.ptr, src.ptr, src.numel() * 4));
    return;
  }
  unwrap(lib.dt_copy_strided(
    src.ptr,
    dst.ptr,
    src.ndim,
    new BigInt64Array(src.shape.map(BigInt)),
    new BigInt64Array(src.strides.map(BigInt)),
    4,
  ));
}
