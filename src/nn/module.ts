/**
 * `Module`: the base of every layer. Parameters, buffers and submodules are found the way PyTorch
 * registers them, in assignment order: own properties holding a {@linkcode Parameter}, a `Module`,
 * or a buffer registered with `registerBuffer`. Names are PyTorch's dotted paths (`layers.1.bias`).
 *
 * [Note: modules in plain containers]
 * PyTorch does not register modules held in a plain list or dict, so their parameters silently
 * miss the optimizer, `state_dict` and DDP. dtrain refuses them instead: walking the module tree
 * (`parameters()`, `stateDict()`, `namedModules()`, ...) throws an error naming the property and
 * pointing to `nn.ModuleList` / `nn.ModuleDict`. A reference that is meant to stay unregistered
 * (modules owned elsewhere) belongs in a private `#field`, which the walk does not see.
 * @module
 */

import { noGrad } from "../tensor/autograd.ts";
import { canonicalDeviceName } from "../tensor/device/mod.ts";
import type { Device } from "../tensor/storage.ts";
import { type FloatDType, isDType, isFloat } from "../tensor/dtype.ts";
import { formatShape, sameShape, type Tensor } from "../tensor/tensor.ts";
import { zeroGradients } from "../optim/optimizer.ts";
import { Parameter } from "./parameter.ts";
import { moduleRepr } from "./_repr.ts";

/** A module's state: parameter and buffer names mapped to tensors. */
export type StateDict = Record<string, Tensor>;

/** Options of {@linkcode Module.loadStateDict}. */
export interface LoadStateDictOptions {
  /** Refuse missing and unexpected keys (default true, like PyTorch). */
  strict?: boolean;
}

/** What `loadStateDict` did not match when not strict. */
export interface IncompatibleKeys {
  /** Keys the module has that the state lacked. */
  missingKeys: string[];
  /** Keys in the state that the module does not have. */
  unexpectedKeys: string[];
}

/**
 * The base class of layers and models (PyTorch's `nn.Module`). Subclasses assign parameters and
 * submodules to properties in their constructor and implement `forward`.
 *
 * @example A custom module
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, Tensor } from "../../mod.ts";
 * class Net extends nn.Module {
 *   fc1 = new nn.Linear(4, 8);
 *   fc2 = new nn.Linear(8, 2);
 *   forward(x: Tensor): Tensor {
 *     return this.fc2.forward(this.fc1.forward(x).relu());
 *   }
 * }
 * assert.deepEqual(Object.keys(new Net().stateDict()), [
 *   "fc1.weight",
 *   "fc1.bias",
 *   "fc2.weight",
 *   "fc2.bias",
 * ]);
 * ```
 */
export abstract class Module {
  /** Training mode (dropout active) or evaluation mode. */
  training = true;
  #buffers = new Map<string, Tensor | null>();

  /**
   * Computes the module's output. Subclasses choose their own arguments and result
   * (`forward(x: Tensor, causal: boolean): [Tensor, Tensor]` is fine), as in PyTorch.
   */
  // deno-lint-ignore no-explicit-any
  abstract forward(...inputs: any[]): any;

  /** Registers a buffer: state saved in `stateDict` that is not trained (like running statistics). */
  registerBuffer(name: string, tensor: Tensor | null): void {
    if (name.includes(".") || name === "") {
      throw new Error(`registerBuffer: invalid buffer name "${name}"`);
    }
    if (tensor) tensor.persistent = true;
    this.#buffers.set(name, tensor);
  }

  /**
   * The direct submodules with their property names. Throws when a property holds modules or
   * parameters inside a plain array or object (see [Note: modules in plain containers]).
   */
  *namedChildren(): Generator<[string, Module]> {
    for (const [name, value] of Object.entries(this)) {
      if (value instanceof Module) yield [name, value];
      else refuseUnregistered(this, name, value);
    }
  }

  /** The direct submodules. */
  *children(): Generator<Module> {
    for (const [, m] of this.namedChildren()) yield m;
  }

  /** This module and every submodule, depth first, with dotted names ("" for this one). */
  *namedModules(prefix = ""): Generator<[string, Module]> {
    yield [prefix, this];
    for (const [name, child] of this.namedChildren()) {
      yield* child.namedModules(prefix ? `${prefix}.${name}` : name);
    }
  }

  /** This module and every submodule. */
  *modules(): Generator<Module> {
    for (const [, m] of this.namedModules()) yield m;
  }

  /** Parameters with dotted names, each once even when shared. */
  *namedParameters(prefix = "", recurse = true): Generator<[string, Parameter]> {
    const seen = new Set<Tensor>();
    const modules = recurse ? this.namedModules(prefix) : [[prefix, this] as [string, Module]];
    for (const [path, module] of modules) {
      for (const [name, value] of Object.entries(module)) {
        if (!(value instanceof Parameter) || seen.has(value)) continue;
        seen.add(value);
        yield [path ? `${path}.${name}` : name, value];
      }
    }
  }

  /** The parameters, in registration order (what optimizers take). */
  parameters(recurse = true): Parameter[] {
    return [...this.namedParameters("", recurse)].map(([, p]) => p);
  }

  /** Buffers with dotted names. */
  *namedBuffers(prefix = ""): Generator<[string, Tensor]> {
    for (const [path, module] of this.namedModules(prefix)) {
      for (const [name, t] of module.#buffers) if (t) yield [path ? `${path}.${name}` : name, t];
    }
  }

  /** The buffers. */
  buffers(): Tensor[] {
    return [...this.namedBuffers()].map(([, b]) => b);
  }

  /** Parameters and buffers by dotted name, sharing memory with the module (not copies). */
  stateDict(): StateDict {
    const state: StateDict = {};
    for (const [path, module] of this.namedModules()) {
      const join = (name: string) => (path ? `${path}.${name}` : name);
      for (const [name, value] of Object.entries(module)) {
        if (value instanceof Parameter) state[join(name)] = value;
      }
      for (const [name, t] of module.#buffers) if (t) state[join(name)] = t;
    }
    return state;
  }

  /**
   * Copies `state` into the module's parameters and buffers. Shape mismatches always throw; with
   * `strict` (default) missing and unexpected keys throw too, all listed in one message. A
   * floating-point tensor converts into one of another floating-point dtype (a bf16 checkpoint
   * into f32 parameters, rounded the other way too), as PyTorch's `copy_` does; other dtypes
   * must match.
   */
  loadStateDict(state: StateDict, options: LoadStateDictOptions = {}): IncompatibleKeys {
    const strict = options.strict ?? true;
    const own = this.stateDict();
    const missingKeys = Object.keys(own).filter((k) => !(k in state));
    const unexpectedKeys = Object.keys(state).filter((k) => !(k in own));
    const problems: string[] = [];
    for (const [key, target] of Object.entries(own)) {
      const source = state[key];
      if (!source) continue;
      const converts = isFloat(source.dtype) && isFloat(target.dtype);
      if (!sameShape(source.shape, target.shape) || (source.dtype !== target.dtype && !converts)) {
        problems.push(
          `size mismatch for ${key}: copying a param with shape ${
            formatShape(source.shape)
          } ${source.dtype} ` +
            `from checkpoint, the shape in current model is ${
              formatShape(target.shape)
            } ${target.dtype}`,
        );
      }
    }
    if (strict && missingKeys.length) {
      problems.unshift(`Missing key(s): ${missingKeys.map((k) => `"${k}"`).join(", ")}.`);
    }
    if (strict && unexpectedKeys.length) {
      problems.splice(
        strict && missingKeys.length ? 1 : 0,
        0,
        `Unexpected key(s): ${unexpectedKeys.map((k) => `"${k}"`).join(", ")}.`,
      );
    }
    if (problems.length) {
      throw new Error(
        `Error(s) in loading state_dict for ${this.constructor.name}:\n\t${problems.join("\n\t")}`,
      );
    }
    noGrad(() => {
      for (const [key, target] of Object.entries(own)) if (state[key]) target.copy_(state[key]);
    });
    return { missingKeys, unexpectedKeys };
  }

  /** Sets training mode on this module and every submodule; returns this. */
  train(mode = true): this {
    for (const m of this.modules()) m.training = mode;
    return this;
  }

  /** Sets evaluation mode (`train(false)`); returns this. */
  eval(): this {
    return this.train(false);
  }

  /**
   * Clears the parameters' gradients. With `setToNone` (the default, like PyTorch) the gradient
   * tensors are disposed and `.grad` becomes null; otherwise they are zeroed in place.
   */
  zeroGrad(setToNone = true): void {
    zeroGradients(this.parameters(), setToNone);
  }

  /**
   * Moves every parameter and buffer to `device` (PyTorch's `module.to(device)`), or converts the
   * floating-point ones to the float dtype `dtype` (`module.to(torch.bfloat16)`; integer and bool
   * buffers stay); returns this. Parameters are replaced by converted copies (shared ones stay
   * shared), so make the optimizer after converting the model, as PyTorch advises. Gradients are
   * dropped.
   */
  to(target: Device | FloatDType): this {
    const moved = new Map<Tensor, Tensor>();
    const dtype = isDType(target) && isFloat(target) ? target : null;
    // Tensors carry canonical device names ("cuda:0").
    const device = dtype === null ? canonicalDeviceName(target) : null;
    const move = <T extends Tensor>(t: T, make: (copy: Tensor) => T): T => {
      if (dtype === null ? t.device === device : !isFloat(t.dtype) || t.dtype === dtype) return t;
      const known = moved.get(t);
      if (known !== undefined) return known as T;
      const copy = make(noGrad(() => t.detach().to(target)));
      moved.set(t, copy);
      return copy;
    };
    for (const m of this.modules()) {
      const props = m as unknown as Record<string, unknown>;
      for (const [name, value] of Object.entries(m)) {
        if (value instanceof Parameter) {
          props[name] = move(value, (c) => new Parameter(c, value.requiresGrad));
        }
      }
      for (const [name, t] of m.#buffers) {
        if (t) m.registerBuffer(name, move(t, (c) => c));
      }
    }
    return this;
  }

  /** Converts the floating-point parameters and buffers to bf16 (PyTorch's `bfloat16()`). */
  bfloat16(): this {
    return this.to("bf16");
  }

  /** Converts the floating-point parameters and buffers to f16 (PyTorch's `half()`). */
  half(): this {
    return this.to("f16");
  }

  /** Converts the floating-point parameters and buffers to f32 (PyTorch's `float()`). */
  float(): this {
    return this.to("f32");
  }

  /** Runs `fn` on every module (children first, then this one); returns this. */
  apply(fn: (module: Module) => void): this {
    for (const child of this.children()) child.apply(fn);
    fn(this);
    return this;
  }

  /** The number of trainable scalars. */
  numParameters(): number {
    return this.parameters().reduce((n, p) => n + p.numel(), 0);
  }

  /**
   * The module's own settings for its printed form (PyTorch's `extra_repr`), such as
   * `in_features=4, out_features=2, bias=True`; empty by default.
   */
  extraRepr(): string {
    return "";
  }

  /** The module tree as PyTorch prints it: `Sequential(\n  (0): Linear(...)\n  (1): ReLU()\n)`. */
  toString(): string {
    return moduleRepr(this);
  }

  /** `console.log(module)` prints the same tree as `String(module)`. */
  [Symbol.for("Deno.customInspect")](): string {
    return this.toString();
  }
}

/** Throws when `value` is a plain array or object holding modules or parameters. */
function refuseUnregistered(owner: Module, name: string, value: unknown): void {
  if (value === null || typeof value !== "object" || value instanceof Module) return;
  const isArray = Array.isArray(value);
  const proto = Object.getPrototypeOf(value);
  if (!isArray && proto !== Object.prototype && proto !== null) return;
  const held = Object.values(value).find((v) => v instanceof Module || v instanceof Parameter);
  if (held === undefined) return;
  const what = held instanceof Parameter ? "a Parameter" : `a ${held.constructor.name}`;
  const fix = held instanceof Parameter
    ? "assign each parameter to its own property (or keep them in a submodule)"
    : isArray
    ? `use nn.ModuleList: this.${name} = new nn.ModuleList([...])`
    : `use nn.ModuleDict: this.${name} = new nn.ModuleDict({...})`;
  throw new TypeError(
    `${owner.constructor.name}.${name} is a plain ${isArray ? "array" : "object"} holding ` +
      `${what}, which would not be registered (its parameters would miss parameters(), ` +
      `stateDict() and DDP); ${fix}`,
  );
}
