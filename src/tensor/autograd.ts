/**
 * Reverse-mode automatic differentiation, micrograd-style: each op records a {@linkcode Node} with
 * a closure that turns the output's gradient into its inputs' gradients; `backward()` walks the
 * nodes in reverse creation order (a valid reverse topological order) and frees every temporary
 * as soon as it is consumed.
 *
 * [Note: gradient-ready hooks]
 * A leaf's gradient is complete when every node that consumed it has run. The engine counts the
 * consumers of each leaf before the walk and, when the count reaches zero, accumulates into
 * `leaf.grad` and runs the leaf's post-accumulate hooks at once, while the rest of backward still
 * runs. DDP starts a bucket's all-reduce from these hooks.
 *
 * [Note: pre-backward hooks]
 * A node may carry a `preBackward` callback, run just before its gradient closure. FSDP puts one
 * on an identity node over each group's outputs, so that the group's parameters are gathered
 * again before any node that reads them runs. The callback may return a promise (the gather in
 * flight): {@linkcode backwardAsync} awaits it before going on; the synchronous `backward`
 * refuses it, since it cannot wait.
 *
 * [Note: captured gradients]
 * Activation checkpointing (src/nn/utils/checkpoint.ts) backpropagates through a recomputed
 * region inside a node of the outer backward. {@linkcode backwardInto} runs that inner pass: the
 * gradients of the region's boundary tensors (its inputs, and the parameters it reads) are summed
 * into a map instead of `.grad`, and the walk does not go past them, so that the outer pass
 * accumulates them and runs their hooks once, as if the region had not been checkpointed.
 * @module
 */

import { isGradEnabled } from "./grad_mode.ts";
import { castFloat, copyInto, fillRaw, updateHalf, wideCopy } from "./inplace.ts";
import { isFloat, isHalf } from "./dtype.ts";
import { formatShape, sameShape } from "./layout.ts";
import type { Tensor } from "./tensor.ts";

// Grad mode has its own file (the in-place ops read it too); its functions are autograd's API.
export { isGradEnabled, noGrad } from "./grad_mode.ts";

/** Turns the output's gradient into one gradient per input (null where none flows). */
export type BackwardFn = (gradOutput: Tensor) => (Tensor | null)[];

let nextSeq = 0;

/**
 * The sequence number the next {@linkcode Node} will get: nodes made from now on have this one
 * or a later one (checkpoint tells the nodes of its region by it).
 * @ignore dtrain-internal
 */
export function nextNodeSeq(): number {
  return nextSeq;
}

/** One recorded operation of the autograd graph. */
export class Node {
  /** Creation order; later nodes run first in backward. */
  readonly seq = nextSeq++;
  #backward: BackwardFn | null;
  #saved: Tensor[];
  /** Tensors whose values the closure reads, with their storage versions at record time. */
  #reads: [Tensor, number][];
  /** Run just before the gradient closure (see [Note: pre-backward hooks]). */
  preBackward: (() => Promise<void> | void) | null = null;

  /**
   * Creates a `Node` (ops do, through `record`).
   *
   * @param name The op's name, for error messages (`MatmulBackward`).
   * @param inputs The op's tensor inputs, in the order the backward returns gradients.
   * @param backward The gradient closure.
   * @param saved Buffers owned by this node (statistics, masks), freed when the graph is.
   * @param reads Tensors whose values the closure reads (see [Note: saved-tensor versions]).
   */
  constructor(
    readonly name: string,
    readonly inputs: readonly Tensor[],
    backward: BackwardFn,
    saved: Tensor[] = [],
    reads: readonly Tensor[] = inputs,
  ) {
    this.#backward = backward;
    this.#saved = saved;
    this.#reads = reads.map((t) => [t, t.storage.version]);
  }

  /**
   * Runs the gradient closure, after checking that what it reads is still there and unchanged.
   *
   * [Note: saved-tensor versions]
   * Every in-place write (`fill_`, `copy_`, `add_`, `mul_`, optimizer steps) bumps its storage's
   * version. A node remembers the versions of the tensors its backward reads; if one changed, the
   * gradient would silently use the new values, so backward refuses instead, like PyTorch.
   */
  apply(gradOutput: Tensor): (Tensor | null)[] {
    if (this.#backward === null) {
      throw new Error(
        `${this.name}: trying to backward through the graph a second time; its buffers were ` +
          `freed (pass { retainGraph: true } to the first backward)`,
      );
    }
    for (const t of this.inputs) this.#checkAlive(t);
    for (const [t, version] of this.#reads) {
      this.#checkAlive(t);
      if (t.storage.version !== version) {
        throw new Error(
          `${this.name}: a ${t.dtype} ${
            formatShape(t.shape)
          } tensor needed for gradient computation ` +
            `was modified by an in-place operation (it is at version ${t.storage.version}, expected ` +
            `${version}); clone it before modifying it, or run backward first`,
        );
      }
    }
    return this.#backward(gradOutput);
  }

  #checkAlive(t: Tensor): void {
    if (t.disposed) {
      throw new ReferenceError(
        `${this.name}: a ${t.dtype} ${
          formatShape(t.shape)
        } tensor saved for backward was disposed ` +
          `(by dispose() or at the end of a tidy() scope) before backward ran; call backward ` +
          `inside the scope, or keep() the tensors it needs`,
      );
    }
  }

  /** Frees the node's buffers and closure after a backward pass. */
  release(): void {
    this.#backward = null;
    for (const t of this.#saved) t.dispose();
    this.#saved = [];
  }
}

/**
 * Records `out` as the result of an op on `inputs` when any input requires a gradient and grad
 * mode is on; otherwise frees `saved` at once. Returns `out`. `saved` lists tensors the node owns
 * (freed with the graph: statistics, and contiguous copies made for the kernel); `reads` lists
 * the tensors whose values the backward reads (all inputs unless said otherwise).
 */
export function record(
  out: Tensor,
  name: string,
  inputs: readonly Tensor[],
  backward: BackwardFn,
  saved: Tensor[] = [],
  reads: readonly Tensor[] = inputs,
): Tensor {
  if (isGradEnabled() && inputs.some((t) => t.requiresGrad)) {
    out.requiresGrad = true;
    out.gradFn = new Node(name, inputs, backward, saved, reads);
  } else {
    for (const t of saved) t.dispose();
  }
  return out;
}

/** Options of {@linkcode backward}. */
export interface BackwardOptions {
  /** Keep the graph's buffers so that backward can run through it again. */
  retainGraph?: boolean;
}

/**
 * Computes the gradients of `root` with respect to every leaf that requires them and accumulates
 * them into the leaves' `.grad`.
 *
 * @param root The tensor to differentiate (a scalar unless `gradient` is given).
 * @param gradient d(something)/d(root); ones for a scalar root.
 * @param options See {@linkcode BackwardOptions}.
 */
export function backward(root: Tensor, gradient?: Tensor, options: BackwardOptions = {}): void {
  for (const pending of walk(root, gradient, options)) {
    pending.catch(() => {});
    throw new Error(
      "backward: a pre-backward hook needs to wait for communication (an FSDP module's " +
        "gather); use `await model.backward(loss)` (or backwardAsync) instead of loss.backward()",
    );
  }
}

/**
 * {@linkcode backward} that awaits the promises returned by nodes' pre-backward hooks (see
 * [Note: pre-backward hooks]); with none, it does exactly what `backward` does.
 *
 * @param root The tensor to differentiate (a scalar unless `gradient` is given).
 * @param gradient d(something)/d(root); ones for a scalar root.
 * @param options See {@linkcode BackwardOptions}.
 */
export async function backwardAsync(
  root: Tensor,
  gradient?: Tensor,
  options: BackwardOptions = {},
): Promise<void> {
  for (const pending of walk(root, gradient, options)) await pending;
}

/**
 * The backward pass from the scalar `root` that sums the gradients of the tensors keyed in
 * `capture` into its values and stops there (see [Note: captured gradients]); yields each promise
 * a pre-backward hook returns, for the caller to await before going on.
 * @ignore dtrain-internal
 */
export function backwardInto(
  root: Tensor,
  capture: Map<Tensor, Tensor | null>,
): Generator<Promise<void>, void, void> {
  return walk(root, undefined, {}, capture);
}

/** The backward pass, yielding each promise a pre-backward hook returns before going on. */
function* walk(
  root: Tensor,
  gradient: Tensor | undefined,
  options: BackwardOptions,
  capture?: Map<Tensor, Tensor | null>,
): Generator<Promise<void>, void, void> {
  if (!root.requiresGrad) {
    throw new Error("backward: the tensor does not require grad and has no grad_fn");
  }
  let seed: Tensor;
  if (gradient === undefined) {
    if (root.numel() !== 1) {
      throw new RangeError(
        `backward: grad can be implicitly created only for scalar outputs, not ${
          formatShape(root.shape)
        }`,
      );
    }
    seed = root.newEmpty(root.shape);
    fillRaw(seed, 1);
  } else {
    if (!sameShape(gradient.shape, root.shape)) {
      throw new RangeError(
        `backward: gradient shape ${formatShape(gradient.shape)} does not match ${
          formatShape(root.shape)
        }`,
      );
    }
    seed = cloneContiguous(gradient);
  }
  if (root.gradFn === null) {
    accumulateLeaf(root, seed);
    runHooks(root);
    return;
  }

  // Collect the graph and count how many nodes consume each leaf.
  const nodes: Node[] = [];
  const pendingConsumers = new Map<Tensor, number>();
  const seen = new Set<Node>([root.gradFn]);
  const stack = [root.gradFn];
  while (stack.length > 0) {
    const node = stack.pop()!;
    nodes.push(node);
    for (const input of node.inputs) {
      if (!input.requiresGrad || capture?.has(input)) continue;
      if (input.gradFn === null) {
        pendingConsumers.set(input, (pendingConsumers.get(input) ?? 0) + 1);
      } else if (!seen.has(input.gradFn)) {
        seen.add(input.gradFn);
        stack.push(input.gradFn);
      }
    }
  }
  nodes.sort((a, b) => b.seq - a.seq);

  const nodeGrads = new Map<Node, Tensor>([[root.gradFn, seed]]);
  const touchedLeaves = new Set<Tensor>();
  for (const node of nodes) {
    let gy = nodeGrads.get(node);
    nodeGrads.delete(node);
    let inputGrads: (Tensor | null)[] = [];
    if (gy !== undefined) {
      if (!gy.isContiguous()) {
        const c = cloneContiguous(gy);
        gy.dispose();
        gy = c;
      }
      const pending = node.preBackward?.();
      if (pending instanceof Promise) yield pending;
      inputGrads = node.apply(gy);
      gy.dispose();
    }
    node.inputs.forEach((input, i) => {
      const raw = inputGrads[i] ?? null;
      const g = raw === null || !input.requiresGrad ? raw : inDTypeOf(input, raw);
      if (!input.requiresGrad) {
        g?.dispose();
        return;
      }
      if (capture?.has(input)) {
        if (g !== null) capture.set(input, sumGrads(capture.get(input) ?? undefined, g));
        return;
      }
      if (input.gradFn !== null) {
        if (g !== null) nodeGrads.set(input.gradFn, sumGrads(nodeGrads.get(input.gradFn), g));
        return;
      }
      if (g !== null) {
        accumulateLeaf(input, g);
        touchedLeaves.add(input);
      }
      const left = pendingConsumers.get(input)! - 1;
      pendingConsumers.set(input, left);
      if (left === 0 && touchedLeaves.has(input)) runHooks(input);
    });
    if (!options.retainGraph) node.release();
  }
  for (const g of nodeGrads.values()) g.dispose();
}

function runHooks(leaf: Tensor): void {
  for (const hook of leaf.postAccumulateGradHooks) hook(leaf);
}

function cloneContiguous(t: Tensor): Tensor {
  const out = t.newEmpty(t.shape);
  copyInto(out, t);
  return out;
}

/**
 * y += x for contiguous gradients of one shape, on their device (no version bump: autograd's
 * own); a half gradient sums in f32 and rounds once, as PyTorch's bf16 accumulation.
 */
function axpy(y: Tensor, x: Tensor): void {
  const dev = y.storage.backend;
  const src = wideCopy(x);
  if (isHalf(y.dtype)) {
    updateHalf(y, (wide) => dev.check(dev.kernels.axpy(wide.ptr, src.ptr, y.numel(), 1)));
  } else dev.check(dev.kernels.axpy(y.ptr, src.ptr, y.numel(), 1));
  if (src !== x) src.dispose();
}

/**
 * `g` in `input`'s floating-point dtype: PyTorch's engine casts each gradient to its input's
 * dtype (validate_outputs), so an f32 weight gets an f32 gradient whatever dtype the ops
 * downstream of it computed in.
 */
function inDTypeOf(input: Tensor, g: Tensor): Tensor {
  if (g.dtype === input.dtype || !isFloat(g.dtype) || !isFloat(input.dtype)) return g;
  const packed = g.isContiguous() ? g : cloneContiguous(g);
  const out = castFloat(packed, input.dtype);
  if (packed !== g) packed.dispose();
  g.dispose();
  return out;
}

/**
 * Sum of two gradient contributions: into `existing` when it alone owns its memory, else out of
 * place (either may share storage with a sibling, such as the two views an add passes back).
 */
function sumGrads(existing: Tensor | undefined, g: Tensor): Tensor {
  if (existing === undefined) return g;
  const owned = existing.storage.refs === 1 && existing.isContiguous() &&
    g.storage !== existing.storage;
  const out = owned ? existing : cloneContiguous(existing);
  const gc = g.isContiguous() ? g : cloneContiguous(g);
  axpy(out, gc);
  if (gc !== g) gc.dispose();
  if (out !== existing) existing.dispose();
  g.dispose();
  return out;
}

/** leaf.grad += g; the first gradient is taken over (copied when it shares memory). */
function accumulateLeaf(leaf: Tensor, g: Tensor): void {
  if (!sameShape(g.shape, leaf.shape)) {
    throw new Error(
      `backward: gradient of shape ${formatShape(g.shape)} for a leaf of shape ${
        formatShape(leaf.shape)
      }`,
    );
  }
  if (leaf.grad === null || leaf.grad.disposed) {
    let owned = g;
    if (!g.isContiguous() || g.storage.refs > 1) {
      owned = cloneContiguous(g);
      g.dispose();
    }
    owned.persistent = true;
    leaf.grad = owned;
    return;
  }
  const gc = g.isContiguous() ? g : cloneContiguous(g);
  axpy(leaf.grad, gc);
  if (gc !== g) gc.dispose();
  g.dispose();
}
