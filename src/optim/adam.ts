/** Adam with L2 weight decay, PyTorch's `torch.optim.Adam`. @module */

import type { Tensor } from "../tensor/tensor.ts";
import { AdamW, type AdamWOptions } from "./adamw.ts";
import type { ParamState } from "./optimizer.ts";

/** Hyperparameters of {@linkcode Adam}: AdamW's, with weight decay an L2 penalty (default 0). */
export type AdamOptions = AdamWOptions;

/**
 * Adam with PyTorch's exact update rule. Unlike {@linkcode AdamW}, weight decay is an L2 penalty
 * added to the gradient (`grad + weightDecay * p`) before the moments are updated, so it is
 * scaled by the adaptive denominator; the update itself is AdamW's native pass with no decoupled
 * decay. (It extends AdamW to reuse that pass; in PyTorch the inheritance runs the other way.)
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, optim } from "../../mod.ts";
 * const model = new nn.Linear(4, 2);
 * const opt = new optim.Adam(model.parameters(), { lr: 1e-3 });
 * assert.equal(opt.paramGroups[0].weightDecay, 0);
 * ```
 */
export class Adam extends AdamW {
  /**
   * Creates a `Adam`.
   *
   * @param params Parameters or parameter groups.
   * @param options See {@linkcode AdamOptions}.
   */
  constructor(
    params: Iterable<Tensor> | ({ params: Iterable<Tensor> } & AdamOptions)[],
    options: AdamOptions = {},
  ) {
    super(params, { weightDecay: 0, ...options });
  }

  /** One Adam update: the L2 term joins the gradient, then AdamW's pass runs without decay. */
  protected override updateParam(
    p: Tensor,
    grad: Tensor,
    state: ParamState,
    o: Required<AdamOptions>,
  ): void {
    if (o.weightDecay === 0) {
      super.updateParam(p, grad, state, o);
      return;
    }
    // Optimizer.step runs this under noGrad: these temporaries record no graph.
    const decay = p.mul(o.weightDecay);
    const penalised = grad.add(decay);
    decay.dispose();
    try {
      super.updateParam(p, penalised, state, { ...o, weightDecay: 0 });
    } finally {
      penalised.dispose();
    }
  }
}
