/** Stochastic gradient descent with momentum, PyTorch's `torch.optim.SGD`. @module */

import type { Tensor } from "../tensor/tensor.ts";
import { Optimizer, type ParamState } from "./optimizer.ts";

/** Hyperparameters of {@linkcode SGD}. */
export interface SGDOptions {
  /** Learning rate. */
  lr: number;
  /** Momentum factor (default 0). */
  momentum?: number;
  /** Dampening for momentum (default 0). */
  dampening?: number;
  /** L2 penalty (default 0). */
  weightDecay?: number;
  /** Nesterov momentum (default false). */
  nesterov?: boolean;
}

/**
 * SGD with PyTorch's exact update rule, fused into one native pass per parameter.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, ones, optim } from "../../mod.ts";
 * const model = new nn.Linear(4, 2);
 * const opt = new optim.SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
 * const before = model.weight.toArray();
 * for (let step = 0; step < 2; step++) {
 *   opt.zeroGrad();
 *   model.forward(ones([1, 4])).sum().backward(); // every weight's gradient is 1
 *   opt.step();
 * }
 * // Steps of 0.1 * 1, then 0.1 * (0.9 * 1 + 1): momentum carries the first gradient along.
 * model.weight.toArray().forEach((w, i) => {
 *   assert.ok(Math.abs(w - (before[i] - 0.29)) < 1e-6, `weight ${i} is ${w}, was ${before[i]}`);
 * });
 * ```
 */
export class SGD extends Optimizer<Required<SGDOptions>> {
  /**
   * Creates a `SGD`.
   *
   * @param params Parameters or parameter groups.
   * @param options See {@linkcode SGDOptions}.
   */
  constructor(
    params: Iterable<Tensor> | ({ params: Iterable<Tensor> } & Partial<SGDOptions>)[],
    options: SGDOptions,
  ) {
    const defaults = { momentum: 0, dampening: 0, weightDecay: 0, nesterov: false, ...options };
    if (defaults.nesterov && (defaults.momentum <= 0 || defaults.dampening !== 0)) {
      throw new RangeError("SGD: Nesterov momentum requires a momentum and zero dampening");
    }
    super(params, defaults);
  }

  /** One fused SGD update. */
  protected updateParam(p: Tensor, grad: Tensor, state: ParamState, o: Required<SGDOptions>): void {
    let buf = state.momentumBuffer as Tensor | undefined;
    const first = o.momentum !== 0 && buf === undefined;
    if (first) state.momentumBuffer = buf = this.buffer(p);
    const dev = p.storage.backend;
    dev.check(dev.kernels.sgdStep(
      p.ptr,
      grad.ptr,
      o.momentum !== 0 ? buf!.ptr : null,
      p.numel(),
      o.lr,
      o.momentum,
      o.dampening,
      o.nesterov ? 1 : 0,
      o.weightDecay,
      first ? 1 : 0,
    ));
  }
}
