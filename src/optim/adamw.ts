/** Adam with decoupled weight decay, PyTorch's `torch.optim.AdamW`. @module */

import type { Tensor } from "../tensor/tensor.ts";
import { Optimizer, type ParamState } from "./optimizer.ts";

/** Hyperparameters of {@linkcode AdamW}. */
export interface AdamWOptions {
  /** Learning rate (default 1e-3). */
  lr?: number;
  /** Coefficients of the running averages of the gradient and its square (default [0.9, 0.999]). */
  betas?: [number, number];
  /** Added to the denominator for stability (default 1e-8). */
  eps?: number;
  /** Decoupled weight decay (default 1e-2, like PyTorch). */
  weightDecay?: number;
}

/**
 * AdamW with PyTorch's exact update rule, fused into one native pass per parameter.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, ones, optim } from "../../mod.ts";
 * const model = new nn.Linear(4, 2);
 * const opt = new optim.AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0.01 });
 * const before = model.weight.toArray();
 * model.forward(ones([1, 4])).sum().backward(); // every weight's gradient is 1
 * opt.step();
 * // Step 1: decay by lr * weightDecay, then move by lr against the gradient's sign.
 * model.weight.toArray().forEach((w, i) => {
 *   const expected = before[i] * (1 - 1e-3 * 0.01) - 1e-3;
 *   assert.ok(Math.abs(w - expected) < 1e-6, `weight ${i} is ${w}, expected ${expected}`);
 * });
 * ```
 */
export class AdamW extends Optimizer<Required<AdamWOptions>> {
  /**
   * Creates a `AdamW`.
   *
   * @param params Parameters or parameter groups.
   * @param options See {@linkcode AdamWOptions}.
   */
  constructor(
    params: Iterable<Tensor> | ({ params: Iterable<Tensor> } & AdamWOptions)[],
    options: AdamWOptions = {},
  ) {
    const defaults: Required<AdamWOptions> = {
      lr: 1e-3,
      betas: [0.9, 0.999],
      eps: 1e-8,
      weightDecay: 1e-2,
      ...options,
    };
    super(params, defaults);
  }

  /** One fused AdamW update. */
  protected updateParam(
    p: Tensor,
    grad: Tensor,
    state: ParamState,
    o: Required<AdamWOptions>,
  ): void {
    if (state.step === undefined) {
      state.step = 0;
      state.expAvg = this.buffer(p);
      state.expAvgSq = this.buffer(p);
    }
    state.step = (state.step as number) + 1;
    const dev = p.storage.backend;
    dev.check(dev.kernels.adamwStep(
      p.ptr,
      grad.ptr,
      (state.expAvg as Tensor).ptr,
      (state.expAvgSq as Tensor).ptr,
      p.numel(),
      o.lr,
      o.betas[0],
      o.betas[1],
      o.eps,
      o.weightDecay,
      state.step,
    ));
  }
}
