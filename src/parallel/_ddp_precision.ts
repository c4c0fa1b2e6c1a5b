/**
 * DDP's mixed precision (see [Note: mixed precision] in mixed_precision.ts): the forward on
 * `paramDtype` copies of the parameters, and bucket all-reduces in `reduceDtype` as PyTorch's
 * `bf16_compress_hook` / `fp16_compress_hook` do them.
 * @module
 */

import { type ProcessGroup, Work } from "../distributed/mod.ts";
import { diagnosePending } from "../distributed/_pending_diagnosis.ts";
import type { Module } from "../nn/module.ts";
import { Parameter } from "../nn/parameter.ts";
import { noGrad } from "../tensor/autograd.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { PrecisionDtype } from "./mixed_precision.ts";

/**
 * Runs `forward` with every parameter of `module` replaced, where the module holds it, by a
 * `dtype` copy made in the graph (the differentiable `to()`: backward widens each copy's gradient
 * into the f32 parameter's `.grad`, where DDP's hooks take it); the attributes are restored after.
 * A parameter held in two places (tied weights) gets one copy.
 */
export function withParamsCast<R>(module: Module, dtype: PrecisionDtype, forward: () => R): R {
  const owners: { holder: Record<string, unknown>; key: string; param: Parameter }[] = [];
  for (const [, m] of module.namedModules()) {
    for (const [key, value] of Object.entries(m)) {
      if (value instanceof Parameter) {
        owners.push({ holder: m as unknown as Record<string, unknown>, key, param: value });
      }
    }
  }
  const copies = new Map<Parameter, Tensor>();
  try {
    for (const { holder, key, param } of owners) {
      let copy = copies.get(param);
      if (copy === undefined) {
        copy = param.dtype === dtype ? param : param.to(dtype);
        copies.set(param, copy);
      }
      holder[key] = copy;
    }
    return forward();
  } finally {
    for (const { holder, key, param } of owners) holder[key] = param;
  }
}

/**
 * PyTorch's `bf16_compress_hook` (`fp16_compress_hook` for f16) on one f32 bucket: the bucket
 * cast to `dtype` and divided by the group size there (rounded, as PyTorch's `div_` on the
 * compressed tensor), summed across ranks in `dtype`, then widened back into the bucket.
 *
 * @param group The process group.
 * @param bucket The f32 bucket buffer (the parameters' gradients are views of it).
 * @param dtype The 2-byte type it travels in.
 * @param blocking Whether to reduce on this thread (`allReduceBlocking`).
 * @returns The all-reduce and the copy back, and the bytes sent.
 */
export function compressedAllReduce(
  group: ProcessGroup,
  bucket: Tensor,
  dtype: "bf16" | "f16",
  blocking: boolean,
): { work: Work; bytes: number } {
  const compressed = noGrad(() => bucket.to(dtype).div_(group.size));
  const reduced = blocking
    ? blockingWork(() => group.allReduceBlocking(compressed, "sum"))
    : group.allReduce(compressed, "sum");
  const done = reduced.wait().then(() =>
    noGrad(() => {
      const wide = compressed.to("f32");
      bucket.copy_(wide);
      wide.dispose();
    })
  ).finally(() => compressed.dispose());
  return { work: new Work(done.then(() => {})), bytes: compressed.numel() * 2 };
}

/**
 * A blocking collective as a Work that has already run: it resolves, or rejects with the failure
 * diagnosed as the async collective's would be (so DDP, awaiting every bucket, reports the
 * earliest one's error).
 *
 * @param run The blocking call.
 * @returns The settled Work.
 */
export function blockingWork(run: () => void): Work {
  try {
    run();
    return new Work(Promise.resolve());
  } catch (err) {
    // Through the noted failures (_pending_diagnosis.ts): DDP's backward, which passes this
    // rejection through diagnosedOnFailure, then finds it diagnosed and does not run it again.
    return new Work(diagnosePending(err).then((diagnosed) => Promise.reject(diagnosed)));
  }
}
