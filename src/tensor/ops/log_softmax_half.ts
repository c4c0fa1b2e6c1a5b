/**
 * The values of PyTorch's CPU log-softmax of a bf16 or f16 tensor over its last dimension, which
 * keeps the row's sum of exponentials and its log in the tensor's dtype: `x - max - L` with
 * `L = round(log(round(sum(exp(x - max)))))`, the difference in float, then the one rounding of
 * the output (aten/src/ATen/native/cpu/SoftMaxKernel.cpp, `_vec_log_softmax_lastdim`, whose
 * temporary sums are of the input's type).
 * @module
 */

import type { HalfDType } from "../dtype.ts";
import { copyInto } from "../inplace.ts";
import type { Tensor } from "../tensor.ts";
import { noGrad } from "../grad_mode.ts";
import { exp, log, sub } from "./elementwise.ts";
import { max } from "./order.ts";
import { sum } from "./reduce.ts";
import { detach, to } from "./shape.ts";

/**
 * Overwrites `y`, the f32 log-softmax of f32 `x` (the upcast half input) over the last dimension,
 * with PyTorch's values before the output's rounding; outside autograd (y's node keeps reading y).
 */
export function matchHalfLogSoftmax(y: Tensor, x: Tensor, dtype: HalfDType): void {
  noGrad(() => {
    const made: Tensor[] = [];
    const keep = (t: Tensor) => (made.push(t), t);
    const round = (t: Tensor) => keep(to(keep(to(t, dtype)), "f32"));
    const xd = keep(detach(x));
    const m = keep(max(xd, -1, true).values);
    const shifted = keep(sub(xd, m));
    const total = round(keep(sum(keep(exp(shifted)), -1, true)));
    const values = keep(sub(shifted, round(keep(log(total)))));
    copyInto(y, values);
    for (const t of new Set(made)) t.dispose();
  });
}
