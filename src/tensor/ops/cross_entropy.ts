/**
 * Cross-entropy, PyTorch's `F.cross_entropy`, on the fused kernels of csrc/core/cross_entropy.c
 * (and csrc/cuda/cross_entropy.cu).
 * @module
 */

import { record } from "../autograd.ts";
import { formatShape } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, expectF32, expectSameDevice, temporaries } from "./_util.ts";
import { contiguous } from "./shape.ts";
import { isHalf } from "../dtype.ts";
import { halfCrossEntropy } from "./cross_entropy_half.ts";
import { viaF32 } from "./_half.ts";
import { autocastActiveFor } from "../autocast_state.ts";
import { ReductionCode } from "../device/device.ts";

/** How a loss combines its per-element values: their mean, their sum, or none (kept as is). */
export type Reduction = "mean" | "sum" | "none";

/** Options of {@linkcode crossEntropy}. */
export interface CrossEntropyOptions {
  /** Targets equal to this are left out of the loss and the mean (PyTorch's default -100). */
  ignoreIndex?: number;
  /** "mean" (default, over the targets not ignored), "sum", or "none" (one loss per row). */
  reduction?: Reduction;
  /**
   * In [0, 1]: the target distribution becomes `(1 - labelSmoothing)` on the class plus
   * `labelSmoothing / C` on every class (default 0).
   */
  labelSmoothing?: number;
}

/**
 * Cross-entropy between logits [N, C] and integer class targets [N] (i32), PyTorch's
 * `F.cross_entropy` with `reduction`, `ignore_index` and `label_smoothing`. The losses and their
 * gradient come from one fused native pass over the logits, with no [N, C] temporary beyond the
 * gradient itself.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * import { crossEntropy } from "./cross_entropy.ts";
 * const logits = tensor([[0, 0], [0, 0]]);
 * const target = tensor([1, 0], [2], { dtype: "i32" });
 * assert.ok(Math.abs(crossEntropy(logits, target).item() - Math.log(2)) < 1e-6);
 * assert.deepEqual(crossEntropy(logits, target, { reduction: "none" }).shape, [2]);
 * ```
 */
export function crossEntropy(
  logits: Tensor,
  target: Tensor,
  options: CrossEntropyOptions = {},
): Tensor {
  const ignoreIndex = options.ignoreIndex ?? -100;
  const reduction = options.reduction ?? "mean";
  const smoothing = options.labelSmoothing ?? 0;
  if (!Object.hasOwn(ReductionCode, reduction)) {
    throw new RangeError(
      `crossEntropy: reduction must be "mean", "sum" or "none", got ${JSON.stringify(reduction)}`,
    );
  }
  if (!(smoothing >= 0 && smoothing <= 1)) {
    throw new RangeError(`crossEntropy: labelSmoothing must be in [0, 1], got ${smoothing}`);
  }
  if (!Number.isInteger(ignoreIndex)) {
    throw new RangeError(`crossEntropy: ignoreIndex must be an integer, got ${ignoreIndex}`);
  }
  if (target.dtype !== "i32") {
    throw new TypeError(`crossEntropy: target must be i32 class indices, got ${target.dtype}`);
  }
  if (logits.ndim !== 2 || target.ndim !== 1 || target.shape[0] !== logits.shape[0]) {
    throw new RangeError(
      `crossEntropy: expected logits [N, C] and target [N], got ${formatShape(logits.shape)} and ${
        formatShape(target.shape)
      }`,
    );
  }
  expectSameDevice("crossEntropy", logits, target);
  if (isHalf(logits.dtype) && !autocastActiveFor(logits)) {
    return halfCrossEntropy(logits, target, { ignoreIndex, reduction, labelSmoothing: smoothing });
  }
  // Autocast runs cross-entropy in f32 (on PyTorch's CPU fp32 list).
  const cast = viaF32("crossEntropy", [logits], (x) => crossEntropy(x, target, options));
  if (cast) return cast;
  expectF32("crossEntropy", logits);
  const [rows, cols] = logits.shape;
  const x = contiguous(logits), y = contiguous(target);
  const perRow = reduction === "none";
  const loss = emptyOn(x, perRow ? [rows] : []);
  const grad = x.requiresGrad ? emptyOn(x, x.shape) : null;
  const dev = loss.storage.backend;
  dev.check(
    dev.kernels.crossEntropy(
      x.ptr,
      y.ptr,
      rows,
      cols,
      ignoreIndex,
      smoothing,
      ReductionCode[reduction],
      loss.ptr,
      grad?.ptr ?? null,
    ),
  );
  if (y !== target) y.dispose();
  return record(
    loss,
    "CrossEntropyBackward",
    [x],
    (gy) => {
      const gx = emptyOn(x, x.shape);
      dev.check(dev.kernels.crossEntropyBackward(grad!.ptr, gy.ptr, gx.ptr, rows, cols, +perRow));
      return [gx];
    },
    [...(grad ? [grad] : []), ...temporaries([x, logits])],
    [],
  );
}
