/**
 * Activation checkpointing (PyTorch's `torch.utils.checkpoint.checkpoint`, `use_reentrant=False`
 * semantics where they fit): a region's forward keeps only its inputs, and backward recomputes it.
 *
 * [Note: how checkpoint works]
 * Forward runs `fn` with grad on, so that the graph tells which tensors requiring grad the region
 * reads from outside: its inputs and whatever `fn` closes over (parameters). That graph is then
 * dropped: its nodes released, the intermediate tensors disposed at once (their memory is what
 * checkpointing saves), and each output tensor gets a `CheckpointOutput` node over one shared
 * scalar whose `CheckpointBackward` node takes the boundary tensors as inputs. In backward the
 * output nodes stash their gradients; the `CheckpointBackward` node's pre-backward hook restores
 * the random state of the forward (dropout draws the same masks) and the autocast state, runs
 * `fn` again with grad on, puts the stashed gradients on the recomputed outputs and backpropagates
 * through the recomputed graph with `backwardInto`, which sums the boundary tensors' gradients
 * instead of accumulating them (see [Note: captured gradients] in src/tensor/autograd.ts); the
 * node returns them, so the outer backward accumulates them into parameters and inputs and runs
 * their hooks (DDP's, FSDP's) once, as a plain backward would. A pre-backward hook inside the
 * recomputed graph may return a promise; the node's hook then returns one too, which
 * `backwardAsync` awaits. The same kernels run in the same order, so gradients are bitwise those
 * of a plain backward, except where a boundary tensor also gets gradient from outside the region
 * and float addition is summed in another order.
 *
 * [Note: recompute preparations]
 * A node of the region may carry a preparation ({@linkcode setRecomputePreparation}): what its
 * pre-backward hook would have done had the region's graph been kept. FSDP's pre-backward node
 * over a fully sharded module's outputs has one (gather the parameters, prefetch the next
 * group's), so that a fully sharded module inside `fn` (`fullyShard`, then
 * `applyActivationCheckpointing`) has its parameters gathered, awaited, before the recompute runs
 * its forward, which then neither gathers nor reshards (PyTorch's FSDP2 pre-forward does nothing
 * in its pre-backward state, for the same reason). The region's graph is dropped, so the
 * checkpoint node runs the preparations it found, in backward order, before recomputing, and
 * carries them as its own preparation for a checkpoint around it. The other order (`fullyShard`
 * around the checkpoint, torchtitan's) needs none: FSDP's hooks are outside the region.
 * @module
 */

import { backwardInto, isGradEnabled, nextNodeSeq, Node } from "../../tensor/autograd.ts";
import { currentAutocast, runWithAutocast } from "../../tensor/autocast_state.ts";
import { zeros } from "../../tensor/creation.ts";
import { getRngState, setRngState } from "../../tensor/random.ts";
import { Tensor } from "../../tensor/tensor.ts";
import { Parameter } from "../parameter.ts";

type Preparation = () => Promise<void> | void;
const preparations = new WeakMap<Node, Preparation>();

/**
 * Gives `node` a preparation: run, and awaited, before a checkpoint region containing `node` is
 * recomputed (see [Note: recompute preparations]).
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function setRecomputePreparation(node: Node, prepare: Preparation): void {
  preparations.set(node, prepare);
}

/** Runs `steps` in order, awaiting each promise one returns before the next. */
function inOrder(steps: readonly Preparation[]): Promise<void> | void {
  for (let i = 0; i < steps.length; i++) {
    const pending = steps[i]();
    if (pending instanceof Promise) return pending.then(() => inOrder(steps.slice(i + 1)));
  }
}

/** Options of {@linkcode checkpointWith}. */
export interface CheckpointOptions {
  /**
   * Restore the random generator's state of the forward before recomputing, so that dropout
   * draws the same masks, and put back the state of the moment after (default true, as PyTorch's
   * `preserve_rng_state`). Off, the recompute draws new numbers and advances the stream.
   */
  preserveRngState?: boolean;
}

/**
 * Runs `fn(...inputs)` without keeping its intermediate activations, and recomputes them in
 * backward (PyTorch's `torch.utils.checkpoint.checkpoint(fn, *inputs, use_reentrant=False)`).
 * `fn` returns a Tensor, an array of Tensors or a plain object of them (as `nn.GPT`'s
 * `{ logits, loss }`); other values in it and non-tensor inputs pass through. Gradients reach the
 * inputs that require grad and every tensor requiring grad that `fn` reads from outside
 * (parameters), equal to those of a plain backward. `fn` must compute the same thing when run
 * again (the random state is replayed; see {@linkcode checkpointWith}); tensors made inside it
 * other than its outputs are disposed after forward, so do not keep references to them. Inside
 * `noGrad`, or when nothing requires grad, it just calls `fn`.
 *
 * @param fn The region to checkpoint (synchronous).
 * @param inputs Its arguments.
 * @returns What `fn` returned.
 * @throws TypeError when `fn` is not a function, returns a promise or returns no tensor.
 *
 * @example Gradients of a checkpointed MLP
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, randn } from "../../../mod.ts";
 * const fc = new nn.Linear(4, 4);
 * const x = randn([2, 4], { requiresGrad: true });
 * const y = nn.utils.checkpoint((t) => fc.forward(t).relu(), x);
 * y.sum().backward();
 * assert.ok(x.grad !== null && fc.weight.grad !== null);
 * ```
 */
export function checkpoint<A extends unknown[], R>(fn: (...args: A) => R, ...inputs: A): R {
  return checkpointWith({}, fn, ...inputs);
}

/**
 * {@linkcode checkpoint} with options (a separate function, since `checkpoint` takes its inputs as
 * rest parameters): `checkpointWith({ preserveRngState: false }, fn, x)`.
 *
 * @param options See {@linkcode CheckpointOptions}.
 * @param fn The region to checkpoint (synchronous).
 * @param inputs Its arguments.
 * @returns What `fn` returned.
 */
export function checkpointWith<A extends unknown[], R>(
  options: CheckpointOptions,
  fn: (...args: A) => R,
  ...inputs: A
): R {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`checkpointWith: options must be an object, got ${options}`);
  }
  for (const key of Object.keys(options)) {
    if (key !== "preserveRngState") {
      throw new TypeError(`checkpointWith: unknown option "${key}" (known: preserveRngState)`);
    }
  }
  if (typeof fn !== "function") {
    throw new TypeError(`checkpoint: fn must be a function, got ${typeof fn}`);
  }
  if (!isGradEnabled()) return fn(...inputs);
  const preserve = options.preserveRngState ?? true;
  const rng = preserve ? getRngState() : null;
  const autocast = currentAutocast();
  const start = nextNodeSeq();
  const output = fn(...inputs);
  const outputs = tensorsOf(output, "fn");
  const region = regionOf(outputs, start);
  const mine = outputs.filter((t) => inRegion(t, start));
  if (region.boundary.length === 0) return output;

  // What the region's pre-backward hooks would have done, latest node first (backward's order).
  const prepare = region.nodes.filter((n) => preparations.has(n)).sort((a, b) => b.seq - a.seq)
    .map((n) => preparations.get(n)!);
  // Drop the region's graph: release its nodes and free its intermediate tensors now.
  for (const node of region.nodes) node.release();
  const keep = new Set(outputs);
  for (const t of region.tensors) if (!keep.has(t)) t.dispose();

  const slots: (Tensor | null)[] = mine.map(() => null);
  const boundary = region.boundary;
  let grads: (Tensor | null)[] | null = null;
  const token = zeros([], { device: mine[0].device });
  token.requiresGrad = true;
  const reads = boundary.filter((t) => !(t instanceof Parameter));
  const node = new Node(
    "CheckpointBackward",
    boundary,
    () => {
      const out = grads ?? boundary.map(() => null);
      grads = null;
      return out;
    },
    [],
    reads,
  );
  if (prepare.length > 0) setRecomputePreparation(node, () => inOrder(prepare));
  const again = () =>
    recompute(
      () => {
        if (rng === null) return runWithAutocast(autocast, () => fn(...inputs));
        const after = getRngState();
        setRngState(rng);
        try {
          return runWithAutocast(autocast, () => fn(...inputs));
        } finally {
          setRngState(after);
        }
      },
      mine,
      slots,
      boundary,
      (g) => grads = g,
    );
  node.preBackward = () => inOrder([...prepare, again]);
  token.gradFn = node;
  mine.forEach((t, i) => {
    t.gradFn = new Node(
      "CheckpointOutput",
      [token],
      (g) => {
        slots[i]?.dispose();
        slots[i] = new Tensor(g.storage, g.shape, g.dtype, g.strides, g.offset);
        return [zeros([], { device: token.device })];
      },
      [],
      [],
    );
  });
  return output;
}

/**
 * The backward of a checkpointed region: runs it again, backpropagates the stashed output
 * gradients through the new graph and hands the boundary tensors' gradients to `done`; returns
 * a promise when a pre-backward hook inside must be awaited (see [Note: how checkpoint works]).
 */
function recompute(
  run: () => unknown,
  original: readonly Tensor[],
  slots: (Tensor | null)[],
  boundary: readonly Tensor[],
  done: (grads: (Tensor | null)[]) => void,
): Promise<void> | void {
  if (!isGradEnabled()) {
    throw new Error(
      "checkpoint: backward ran with grad disabled (inside noGrad); the " +
        "checkpointed region must be recomputed with grad on",
    );
  }
  const start = nextNodeSeq();
  let result: unknown;
  try {
    result = run();
  } catch (err) {
    throw new Error(
      `checkpoint: recomputing the region in backward failed: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const again = tensorsOf(result, "fn (recomputed)");
  const fresh = again.filter((t) => inRegion(t, start));
  if (fresh.length !== original.length) {
    throw new Error(
      `checkpoint: the recomputed forward returned ${fresh.length} tensors requiring grad, ` +
        `the first forward ${original.length}; fn must compute the same thing when run again`,
    );
  }
  fresh.forEach((t, i) => {
    if (`${t.shape}` !== `${original[i].shape}` || t.dtype !== original[i].dtype) {
      throw new Error(
        `checkpoint: recomputed output ${i} is ${t.dtype} [${t.shape}], the first forward's ` +
          `${original[i].dtype} [${original[i].shape}]; fn must compute the same thing again`,
      );
    }
  });
  const region = regionOf(fresh, start);
  const pairs = fresh.map((t, i) => [t, slots[i]] as const).filter(([, g]) => g !== null);
  slots.fill(null);
  const capture = new Map<Tensor, Tensor | null>(boundary.map((t) => [t, null]));
  const finish = () => {
    for (const t of region.tensors) t.dispose();
    for (const t of fresh) t.dispose();
    done(boundary.map((t) => capture.get(t) ?? null));
  };
  if (pairs.length === 0) return finish();
  // One scalar over the recomputed outputs, whose node hands each its stashed gradient.
  const join = zeros([], { device: fresh[0].device });
  join.requiresGrad = true;
  join.gradFn = new Node("CheckpointJoin", pairs.map(([t]) => t), () => pairs.map(([, g]) => g));
  const walk = backwardInto(join, capture);
  const drive = (): Promise<void> | void => {
    for (let step = walk.next(); !step.done; step = walk.next()) return step.value.then(drive);
    join.dispose();
    finish();
  };
  return drive();
}

/** The tensors in `value` (a Tensor, an array or a plain object of them), in order. */
function tensorsOf(value: unknown, what: string): Tensor[] {
  if (value instanceof Promise) {
    throw new TypeError(`checkpoint: ${what} returned a Promise; it must be synchronous`);
  }
  const found: Tensor[] = [];
  const seen = new Set<Tensor>();
  const visit = (v: unknown) => {
    if (v instanceof Tensor) {
      if (!seen.has(v)) found.push(v);
      seen.add(v);
    } else if (Array.isArray(v)) v.forEach(visit);
    else if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
      Object.values(v).forEach(visit);
    }
  };
  visit(value);
  if (found.length === 0) {
    throw new TypeError(
      `checkpoint: ${what} returned no tensor (got ${describe(value)}); it must return a ` +
        "Tensor, an array of Tensors or a plain object of Tensors",
    );
  }
  return found;
}

function describe(value: unknown): string {
  if (value === null || typeof value !== "object") return String(value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  const name = value.constructor?.name ?? "Object";
  return /^[AEIOU]/.test(name) ? `an ${name}` : `a ${name}`;
}

/** Whether `t` was made by a node recorded since `start`. */
function inRegion(t: Tensor, start: number): boolean {
  return t.requiresGrad && t.gradFn !== null && t.gradFn.seq >= start;
}

/**
 * The graph recorded since `start` under `outputs`: its nodes, the tensors they made (that feed
 * other nodes of it) and the tensors requiring grad it reads from before (its boundary), in order.
 */
function regionOf(
  outputs: readonly Tensor[],
  start: number,
): { nodes: Node[]; tensors: Set<Tensor>; boundary: Tensor[] } {
  const nodes: Node[] = [];
  const tensors = new Set<Tensor>();
  const boundary = new Set<Tensor>();
  const seen = new Set<Node>();
  const stack = outputs.filter((t) => inRegion(t, start)).map((t) => t.gradFn!);
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (seen.has(node)) continue;
    seen.add(node);
    nodes.push(node);
    for (const input of node.inputs) {
      if (!input.requiresGrad) continue;
      if (inRegion(input, start)) {
        tensors.add(input);
        stack.push(input.gradFn!);
      } else boundary.add(input);
    }
  }
  return { nodes, tensors, boundary: [...boundary] };
}
