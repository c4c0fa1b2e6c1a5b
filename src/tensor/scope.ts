/**
 * `tidy(fn)`: deterministic release of every tensor made inside `fn` but what it returns (see
 * [Note: tensor lifetime] in storage.ts), and `keep(t)` to take a tensor out of its scope.
 * @module
 */

/** What a scope needs of a tensor: to be disposed, or spared when persistent. */
export interface Scoped {
  /** Frees the tensor's reference to its storage. */
  dispose(): void;
  /** Parameters, gradients and optimizer state outlive every scope. */
  persistent: boolean;
}

const scopes: Set<Scoped>[] = [];

/** Whether a `tidy` scope is open (its tensors will be disposed when it closes). */
export function insideTidy(): boolean {
  return scopes.length > 0;
}

/** Records a new tensor in the innermost open scope, if any. */
export function track(t: Scoped): void {
  if (scopes.length > 0) scopes[scopes.length - 1].add(t);
}

/**
 * Takes `t` out of every open scope so that `tidy` leaves it alive; returns `t`.
 *
 * @example Keep a tensor made inside tidy
 * ```ts
 * import assert from "node:assert/strict";
 * import { keep, type Tensor, tensor, tidy } from "../../mod.ts";
 * let kept: Tensor | undefined, dropped: Tensor | undefined;
 * tidy(() => {
 *   dropped = tensor([1, 2, 3]);
 *   kept = keep(dropped.mul(2));
 * });
 * assert.equal(dropped!.disposed, true);
 * assert.deepStrictEqual(kept!.toArray(), new Float32Array([2, 4, 6]));
 * ```
 */
export function keep<T extends Scoped>(t: T): T {
  for (const scope of scopes) scope.delete(t);
  return t;
}

/**
 * Runs `fn` and disposes every tensor created while it ran, except the tensors it returns
 * (directly, or inside an array or a plain object) and persistent ones. Returned tensors move to
 * the enclosing scope. Scopes nest. `fn` must be synchronous (see {@linkcode tidyAsync}).
 *
 * @param fn The work whose temporaries are freed.
 * @returns What `fn` returned.
 *
 * @example One training step that leaves no native memory behind
 * ```ts
 * import assert from "node:assert/strict";
 * import { allocatedBytes, F, nn, optim, tensor, tidy } from "../../mod.ts";
 * const model = new nn.Linear(4, 2);
 * const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
 * const x = tensor([[1, 2, 3, 4]]), y = tensor([1], [1], { dtype: "i32" });
 * const trainStep = () =>
 *   tidy(() => {
 *     const l = F.crossEntropy(model.forward(x), y);
 *     l.backward();
 *     opt.step();
 *     opt.zeroGrad();
 *     return l.item();
 *   });
 * const first = trainStep(); // makes the gradients, which persist
 * const before = allocatedBytes();
 * const second = trainStep();
 * assert.equal(allocatedBytes(), before);
 * assert.ok(second < first);
 * ```
 */
export function tidy<R>(fn: () => R): R {
  const scope = openScope();
  let result: R;
  try {
    result = fn();
  } catch (error) {
    closeScope(scope, undefined);
    throw error;
  }
  if (result instanceof Promise) {
    closeScope(scope, undefined);
    throw new TypeError("tidy: fn returned a Promise; use tidyAsync for asynchronous work");
  }
  closeScope(scope, result);
  return result;
}

/**
 * The asynchronous form of {@linkcode tidy}, for steps that await collectives (such as
 * `await ddp.backward(loss)`). Tensors made by any code while `fn` runs are attributed to the
 * innermost open scope, so do not run other tensor-making work concurrently with it.
 *
 * @param fn The asynchronous work whose temporaries are freed.
 * @returns What `fn` resolved to.
 */
export async function tidyAsync<R>(fn: () => Promise<R>): Promise<R> {
  const scope = openScope();
  let result: R;
  try {
    result = await fn();
  } catch (error) {
    closeScope(scope, undefined);
    throw error;
  }
  closeScope(scope, result);
  return result;
}

function openScope(): Set<Scoped> {
  const scope = new Set<Scoped>();
  scopes.push(scope);
  return scope;
}

/** Closes `scope`: frees what `result` does not hold, hands the rest to the enclosing scope. */
function closeScope(scope: Set<Scoped>, result: unknown): void {
  const at = scopes.lastIndexOf(scope);
  if (at >= 0) scopes.splice(at, 1);
  const spared = new Set<unknown>();
  collectTensors(result, spared);
  for (const t of scope) {
    if (spared.has(t)) track(t);
    else if (!t.persistent) t.dispose();
  }
}

function collectTensors(value: unknown, into: Set<unknown>): void {
  if (value === null || typeof value !== "object") return;
  if ("dispose" in value && "persistent" in value) {
    into.add(value);
  } else if (Array.isArray(value)) {
    for (const v of value) collectTensors(v, into);
  } else if (Object.getPrototypeOf(value) === Object.prototype) {
    for (const v of Object.values(value)) collectTensors(v, into);
  }
}
