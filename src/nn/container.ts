/** Containers: `Sequential` and the `MLP` built on it, `ModuleList`, `ModuleDict`. @module */

import type { Tensor } from "../tensor/tensor.ts";
import { foldedChildren, moduleRepr } from "./_repr.ts";
import { Dropout, GELU, Linear, ReLU } from "./layers.ts";
import { Module } from "./module.ts";

function checkModule(value: unknown, where: string): Module {
  if (!(value instanceof Module)) {
    const seen = value === null ? "null" : (value as object).constructor?.name ?? typeof value;
    throw new TypeError(`${where} is not a Module, got ${seen}`);
  }
  return value;
}

/**
 * Runs its modules in order; they are named "0", "1", ... as in PyTorch, so state dicts match.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn } from "../../mod.ts";
 * const model = new nn.Sequential(new nn.Linear(784, 512), new nn.ReLU(), new nn.Linear(512, 10));
 * assert.deepEqual(Object.keys(model.stateDict()), ["0.weight", "0.bias", "2.weight", "2.bias"]);
 * ```
 */
export class Sequential extends Module {
  /** The module at a position. */
  [index: number]: Module;
  /** How many modules it holds. */
  readonly length: number;

  /**
   * Creates a `Sequential`.
   *
   * @param modules The modules, in order.
   */
  constructor(...modules: Module[]) {
    super();
    modules.forEach((m, i) => this[i] = checkModule(m, `Sequential: argument ${i}`));
    this.length = modules.length;
  }

  /** Feeds x through every module. */
  forward(x: Tensor): Tensor {
    let out = x;
    for (let i = 0; i < this.length; i++) out = this[i].forward(out);
    return out;
  }
}

/** Options of {@linkcode MLP}. */
export interface MLPOptions {
  /** Activation between layers (default "relu"). */
  activation?: "relu" | "gelu";
  /** Dropout probability after each activation (default 0: none). */
  dropout?: number;
  /** Whether the linear layers have biases (default true). */
  bias?: boolean;
}

/**
 * A multi-layer perceptron: Linear layers of the given sizes with an activation between them.
 * `new MLP([784, 512, 512, 10])` is `Sequential(Linear(784,512), ReLU(), Linear(512,512), ReLU(),
 * Linear(512,10))`, with the same state-dict names as that PyTorch model.
 */
export class MLP extends Sequential {
  /**
   * Creates a `MLP`.
   *
   * @param sizes Input size, hidden sizes, output size (at least two numbers).
   * @param options See {@linkcode MLPOptions}.
   */
  constructor(sizes: readonly number[], options: MLPOptions = {}) {
    if (sizes.length < 2) {
      throw new RangeError(
        `MLP: needs at least an input and an output size, got [${sizes.join(", ")}]`,
      );
    }
    const activation = options.activation ?? "relu";
    if (activation !== "relu" && activation !== "gelu") {
      throw new RangeError(`MLP: unknown activation "${activation}"`);
    }
    const layers: Module[] = [];
    for (let i = 0; i + 1 < sizes.length; i++) {
      layers.push(new Linear(sizes[i], sizes[i + 1], { bias: options.bias ?? true }));
      if (i + 2 < sizes.length) {
        layers.push(activation === "relu" ? new ReLU() : new GELU());
        if (options.dropout) layers.push(new Dropout(options.dropout));
      }
    }
    super(...layers);
  }
}

/**
 * Holds submodules in a list, registered under "0", "1", ... as in PyTorch's `nn.ModuleList`, so
 * their parameters reach the optimizer, the state dict and DDP. It has no `forward`: iterate.
 *
 * @example Blocks in a list
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, Tensor } from "../../mod.ts";
 * class Net extends nn.Module {
 *   blocks = new nn.ModuleList([new nn.Linear(4, 4), new nn.Linear(4, 4)]);
 *   forward(x: Tensor): Tensor {
 *     for (const block of this.blocks) x = block.forward(x);
 *     return x;
 *   }
 * }
 * const net = new Net();
 * assert.equal(net.parameters().length, 4);
 * assert.deepEqual(Object.keys(net.stateDict()).slice(0, 2), ["blocks.0.weight", "blocks.0.bias"]);
 * ```
 */
export class ModuleList<M extends Module = Module> extends Module implements Iterable<M> {
  /** The module at a position. */
  [index: number]: M;
  #length = 0;

  /**
   * Creates a `ModuleList`.
   *
   * @param modules The initial modules, in order.
   */
  constructor(modules: Iterable<M> = []) {
    super();
    this.extend(modules);
  }

  /** How many modules it holds. */
  get length(): number {
    return this.#length;
  }

  /** The module at `index`; negative counts from the end, as in Python. */
  at(index: number): M {
    const i = index < 0 ? index + this.#length : index;
    if (!Number.isInteger(i) || i < 0 || i >= this.#length) {
      throw new RangeError(
        `ModuleList: index ${index} is out of range for ${this.#length} modules`,
      );
    }
    return this[i];
  }

  /** Adds `module` at the end; returns this. */
  append(module: M): this {
    this[this.#length] = checkModule(module, `ModuleList.append: module ${this.#length}`) as M;
    this.#length++;
    return this;
  }

  /** Adds every module of `modules` at the end; returns this. */
  extend(modules: Iterable<M>): this {
    for (const m of modules) this.append(m);
    return this;
  }

  /** Inserts `module` before `index` (which may be negative or the length). */
  insert(index: number, module: M): void {
    const at = Math.min(Math.max(index < 0 ? index + this.#length : index, 0), this.#length);
    checkModule(module, `ModuleList.insert: module`);
    for (let i = this.#length; i > at; i--) this[i] = this[i - 1];
    this[at] = module;
    this.#length++;
  }

  /** The modules in order. */
  *[Symbol.iterator](): Iterator<M> {
    for (let i = 0; i < this.#length; i++) yield this[i];
  }

  /** A ModuleList is a container, not a layer. */
  forward(): never {
    throw new Error("ModuleList has no forward: iterate over it and call each module");
  }

  /** PyTorch's ModuleList form: runs of equal modules print as `(0-11): 12 x Block(...)`. */
  override toString(): string {
    return moduleRepr(this, foldedChildren([...this]));
  }
}

/**
 * Holds submodules by name, registered under those names in insertion order as in PyTorch's
 * `nn.ModuleDict`. Names are free (`training` or `forward` do not clash with the module's own
 * members) but may not contain "." or be empty.
 *
 * @example Heads by name
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn } from "../../mod.ts";
 * const heads = new nn.ModuleDict({ cls: new nn.Linear(8, 3), box: new nn.Linear(8, 4) });
 * assert.deepEqual([...heads.keys()], ["cls", "box"]);
 * assert.equal(heads.get("box").outFeatures, 4);
 * assert.deepEqual(Object.keys(heads.stateDict()), ["cls.weight", "cls.bias", "box.weight", "box.bias"]);
 * ```
 */
export class ModuleDict<M extends Module = Module> extends Module {
  readonly #modules = new Map<string, M>();

  /**
   * Creates a `ModuleDict`.
   *
   * @param modules Initial entries: an object or `[name, module]` pairs.
   */
  constructor(modules: Record<string, M> | Iterable<[string, M]> = {}) {
    super();
    const entries = Symbol.iterator in modules
      ? modules as Iterable<[string, M]>
      : Object.entries(modules);
    for (const [name, m] of entries) this.set(name, m);
  }

  /** How many modules it holds. */
  get length(): number {
    return this.#modules.size;
  }

  /** The module named `name`; throws naming the known names when there is none. */
  get(name: string): M {
    const m = this.#modules.get(name);
    if (m === undefined) {
      throw new RangeError(
        `ModuleDict: no module named "${name}" (has ${[...this.#modules.keys()].join(", ")})`,
      );
    }
    return m;
  }

  /** Adds or replaces the module named `name`; returns this. */
  set(name: string, module: M): this {
    if (typeof name !== "string" || name === "" || name.includes(".")) {
      throw new RangeError(`ModuleDict: module name can't be empty or contain ".", got "${name}"`);
    }
    this.#modules.set(name, checkModule(module, `ModuleDict: "${name}"`) as M);
    return this;
  }

  /** Whether a module is named `name`. */
  has(name: string): boolean {
    return this.#modules.has(name);
  }

  /** Removes the module named `name` and returns it (PyTorch's `pop`). */
  pop(name: string): M {
    const m = this.get(name);
    this.#modules.delete(name);
    return m;
  }

  /** The names, in insertion order. */
  keys(): IterableIterator<string> {
    return this.#modules.keys();
  }

  /** The modules, in insertion order. */
  values(): IterableIterator<M> {
    return this.#modules.values();
  }

  /** `[name, module]` pairs, in insertion order. */
  items(): IterableIterator<[string, M]> {
    return this.#modules.entries();
  }

  /** The entries are the children. */
  override *namedChildren(): Generator<[string, Module]> {
    yield* this.#modules;
  }

  /** A ModuleDict is a container, not a layer. */
  forward(): never {
    throw new Error("ModuleDict has no forward: get a module by name and call it");
  }
}
