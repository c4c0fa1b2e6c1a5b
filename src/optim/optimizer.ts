/**
 * The `Optimizer` base: parameter groups, per-parameter state, `zeroGrad`, and state dicts in
 * PyTorch's layout (`state` keyed by parameter index, `paramGroups` holding hyperparameters and
 * the indices of their parameters).
 * @module
 */

import type { z } from "zod";
import { isFloat, isHalf } from "../tensor/dtype.ts";
import { updateHalf, wideCopy } from "../tensor/inplace.ts";
import { noGrad } from "../tensor/autograd.ts";
import { formatShape, sameShape, type Tensor } from "../tensor/tensor.ts";
import {
  checkHyperparameters,
  firstIssue,
  HyperparametersSchema,
  shown,
  StateScalarsSchema,
} from "./hyperparameters.ts";

/**
 * A group of parameters and its hyperparameters, flat as in PyTorch's `param_groups`: the
 * optimizer reads `lr`, `weightDecay`, `betas`, ... from the group at every step, so
 * `optimizer.paramGroups[0].lr = 0.01` takes effect on the next `step()`.
 */
export type ParamGroup<H> = H & {
  /** The parameters. */
  params: Tensor[];
};

/** Per-parameter state: tensors (buffers) and numbers (step counts). */
export type ParamState = Record<string, Tensor | number>;

/** An optimizer's state dict (PyTorch's layout, camelCase). */
export interface OptimizerStateDict<H> {
  /** State by parameter index (counting through the groups in order). */
  state: Record<number, ParamState>;
  /** Hyperparameters per group with the indices of its parameters. */
  paramGroups: (H & { params: number[] })[];
}

/** The base of dtrain's optimizers. Subclasses implement `updateParam`. */
export abstract class Optimizer<H extends { lr: number }> {
  /** The parameter groups with their current hyperparameters (schedulers and users change them). */
  readonly paramGroups: ParamGroup<H>[];
  /** Per-parameter state, created lazily on the first step. */
  readonly state: Map<Tensor, ParamState> = new Map();

  /**
   * Creates a `Optimizer`.
   *
   * @param params Parameters, or groups `{ params, ...overrides }`.
   * @param defaults Hyperparameters for groups that do not override them.
   */
  constructor(
    params: Iterable<Tensor> | (Partial<H> & { params: Iterable<Tensor> })[],
    defaults: H,
  ) {
    const list = [...params] as (Tensor | (Partial<H> & { params: Iterable<Tensor> }))[];
    const groups = list.length > 0 && !("shape" in list[0])
      ? (list as (Partial<H> & { params: Iterable<Tensor> })[])
      : [{ params: list as Tensor[] } as unknown as Partial<H> & { params: Iterable<Tensor> }];
    const seen = new Set<Tensor>();
    this.paramGroups = groups.map((g) => {
      const { params: groupParams, ...overrides } = g;
      const ps = [...groupParams];
      for (const p of ps) {
        if (seen.has(p)) {
          throw new Error(
            `${this.constructor.name}: some parameters appear in more than one parameter group`,
          );
        }
        if (!isFloat(p.dtype)) {
          throw new TypeError(
            `${this.constructor.name}: can only optimize floating-point tensors, got ${p.dtype}`,
          );
        }
        seen.add(p);
      }
      checkHyperparameters(this.constructor.name, { ...defaults, ...overrides });
      return { ...defaults, ...overrides, params: ps } as ParamGroup<H>;
    });
    if (seen.size === 0) throw new Error(`${this.constructor.name}: got an empty parameter list`);
  }

  /** Applies one update to every parameter that has a gradient. */
  step(): void {
    noGrad(() => {
      for (const group of this.paramGroups) {
        for (const p of group.params) {
          if (p.grad === null) continue;
          if (!p.isContiguous() || !p.grad.isContiguous()) {
            throw new Error(
              `${this.constructor.name}: parameter ${
                formatShape(p.shape)
              } or its gradient is not contiguous`,
            );
          }
          let state = this.state.get(p);
          if (state === undefined) {
            state = {};
            this.state.set(p, state);
          }
          if (isHalf(p.dtype)) this.#updateHalf(p, p.grad, state, group);
          else this.updateParam(p, p.grad, state, group);
          p.storage.version++; // an in-place write (see [Note: saved-tensor versions])
        }
      }
    });
  }

  /**
   * [Note: half parameters]
   * A bf16 or f16 parameter is updated in f32: its values and gradient are upcast, the f32 update
   * runs with f32 state, and the result rounds into the parameter once per step. PyTorch keeps
   * the state in the parameter's dtype and rounds after each elementwise op of the update; f32
   * state loses less (the small second moments of Adam underflow in f16), so the bits differ from
   * PyTorch's by the roundings it does in between.
   */
  #updateHalf(p: Tensor, grad: Tensor, state: ParamState, group: ParamGroup<H>): void {
    const g = wideCopy(grad);
    try {
      updateHalf(p, (wide) => this.updateParam(wide, g, state, group));
    } finally {
      if (g !== grad) g.dispose();
    }
  }

  /** Updates one parameter in place from its gradient and state. */
  protected abstract updateParam(param: Tensor, grad: Tensor, state: ParamState, options: H): void;

  /** A persistent f32 zero buffer shaped like `p`, for optimizer state (see [Note: half parameters]). */
  protected buffer(p: Tensor): Tensor {
    const t = p.newEmpty(p.shape, { dtype: "f32", zero: true });
    t.persistent = true;
    return t;
  }

  /** Clears the gradients (disposed and set to null by default, like PyTorch). */
  zeroGrad(setToNone = true): void {
    zeroGradients(this.paramGroups.flatMap((g) => g.params), setToNone);
  }

  /** The state dict: buffers are shared with the optimizer, not copied. */
  stateDict(): OptimizerStateDict<H> {
    const state: Record<number, ParamState> = {};
    let index = 0;
    const paramGroups = this.paramGroups.map((g) => {
      const ids = g.params.map((p) => {
        const s = this.state.get(p);
        if (s) state[index] = { ...s };
        return index++;
      });
      return { ...g, params: ids } as H & { params: number[] };
    });
    return { state, paramGroups };
  }

  /**
   * Restores a state dict made by an optimizer over the same parameter layout. Hyperparameters and
   * number-valued state are held to the constructor's rules (finite; `lr` and `weightDecay` at
   * least 0, `momentum` and `betas` in [0, 1), `eps` above 0, `step` a count), as a state dict
   * read from a file may hold anything.
   *
   * @throws RangeError naming the field and the value when one breaks those rules.
   * @throws Error when the layout (groups, parameters, buffer shapes) differs from this one's.
   */
  loadStateDict(dict: OptimizerStateDict<H>): void {
    const name = this.constructor.name;
    checkStateValues(name, dict);
    if (dict.paramGroups.length !== this.paramGroups.length) {
      throw new Error(
        `${name}.loadStateDict: ${dict.paramGroups.length} parameter groups, optimizer has ${this.paramGroups.length}`,
      );
    }
    const byIndex: Tensor[] = [];
    dict.paramGroups.forEach((g, i) => {
      if (g.params.length !== this.paramGroups[i].params.length) {
        throw new Error(
          `${name}.loadStateDict: group ${i} has ${g.params.length} parameters, optimizer has ${
            this.paramGroups[i].params.length
          }`,
        );
      }
      g.params.forEach((id, j) => (byIndex[id] = this.paramGroups[i].params[j]));
    });
    for (const [key, s] of Object.entries(dict.state)) {
      const p = byIndex[Number(key)];
      if (!p) throw new Error(`${name}.loadStateDict: state for unknown parameter index ${key}`);
      for (const [field, v] of Object.entries(s)) {
        if (typeof v !== "number" && !sameShape(v.shape, p.shape)) {
          throw new Error(
            `${name}.loadStateDict: state "${field}" of parameter ${key} is ${
              formatShape(v.shape)
            }, parameter is ${formatShape(p.shape)}`,
          );
        }
      }
    }
    this.state.clear();
    for (const [key, s] of Object.entries(dict.state)) {
      const p = byIndex[Number(key)];
      const copy: ParamState = {};
      for (const [field, v] of Object.entries(s)) {
        copy[field] = typeof v === "number" ? v : noGrad(() => this.buffer(p).copy_(v));
      }
      this.state.set(p, copy);
    }
    dict.paramGroups.forEach((g, i) => {
      const { params: _ids, ...options } = g;
      Object.assign(this.paramGroups[i], options);
    });
  }
}

/** Refuses a state dict whose hyperparameters or number-valued state break the rules. */
function checkStateValues(owner: string, dict: OptimizerStateDict<{ lr: number }>): void {
  const check = (field: string, schema: z.ZodType, value: unknown) => {
    const result = schema.safeParse(value);
    if (result.success) return;
    const issue = firstIssue(result.error, value);
    const path = [field, ...issue.path.map(String)].join(".");
    throw new RangeError(
      `${owner}.loadStateDict: ${path}: ${issue.message} (got ${shown(issue.seen)})`,
    );
  };
  dict.paramGroups.forEach((g, i) => {
    const { params: _, ...hyperparameters } = g;
    check(`paramGroups.${i}`, HyperparametersSchema, hyperparameters);
  });
  for (const [key, s] of Object.entries(dict.state)) {
    // Tensors are buffers (their shapes are checked against the parameters); the rest are numbers.
    const scalars = Object.fromEntries(
      Object.entries(s).filter(([, v]) => typeof v !== "object" || v === null),
    );
    check(`state.${key}`, StateScalarsSchema, scalars);
  }
}

/**
 * Clears gradients of `params`, shared by `Optimizer.zeroGrad` and `Module.zeroGrad`: it lives
 * here because optimizers act on tensors and sit below `nn`, which may import them (GPT's
 * `configureOptimizers` builds an AdamW) but not the other way round.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function zeroGradients(params: Iterable<Tensor>, setToNone: boolean): void {
  for (const p of params) {
    if (p.grad === null) continue;
    if (setToNone) {
      p.grad.dispose();
      p.grad = null;
    } else {
      p.grad.zero_();
    }
  }
}
