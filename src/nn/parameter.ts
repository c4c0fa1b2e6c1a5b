/** `Parameter`: a tensor that a module owns and an optimizer updates. @module */

import { Tensor } from "../tensor/tensor.ts";

/**
 * A leaf tensor registered as a module parameter (PyTorch's `nn.Parameter`): it requires a
 * gradient by default and is never freed by `tidy`. It shares `data`'s memory.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, zeros } from "../../mod.ts";
 * const p = new nn.Parameter(zeros([3]));
 * assert.equal(p.requiresGrad, true);
 * ```
 */
export class Parameter extends Tensor {
  /**
   * Creates a `Parameter`.
   *
   * @param data The initial values (shared, not copied).
   * @param requiresGrad Whether the optimizer should train it.
   */
  constructor(data: Tensor, requiresGrad = true) {
    super(data.storage, data.shape, data.dtype, data.strides, data.offset);
    this.persistent = true;
    if (requiresGrad) this.requiresGrad_(true);
  }
}
