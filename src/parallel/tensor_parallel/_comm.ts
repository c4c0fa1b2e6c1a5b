/**
 * The blocking collectives tensor parallelism runs inside a synchronous forward and backward, as
 * tensors: every rank's tensor stacked or concatenated along a dimension, the all-reduced sum or
 * maximum, the reduce-scatter along a dimension, and this rank's chunk of one. Each returns a new
 * tensor and leaves its input alone.
 * @module
 */

import type { ProcessGroup } from "../../distributed/process_group.ts";
import { noGrad } from "../../tensor/autograd.ts";
import { cat } from "../../tensor/ops/indexing.ts";
import { Tensor } from "../../tensor/tensor.ts";

/** Every rank's `t`, stacked in rank order: [size, ...t.shape]. */
export function gatherStacked(group: ProcessGroup, t: Tensor): Tensor {
  return noGrad(() => {
    const input = t.contiguous();
    const out = Tensor.empty([group.size, ...t.shape], t.dtype, false, t.device);
    try {
      group.allGatherBlocking(out, input);
    } catch (err) {
      out.dispose();
      throw err;
    } finally {
      if (input !== t) input.dispose();
    }
    return out;
  });
}

/** The elementwise sum (or maximum) of every rank's `t`, all-reduced; a new tensor. */
export function allReduced(group: ProcessGroup, t: Tensor, op: "sum" | "max" = "sum"): Tensor {
  return noGrad(() => {
    const out = t.clone(); // contiguous, and t is left alone
    try {
      group.allReduceBlocking(out, op);
    } catch (err) {
      out.dispose();
      throw err;
    }
    return out;
  });
}

/** Every rank's `t` concatenated along `dim` in rank order. */
export function gatheredAlong(group: ProcessGroup, t: Tensor, dim: number): Tensor {
  return noGrad(() => {
    const stacked = gatherStacked(group, t);
    const parts = Array.from({ length: group.size }, (_, r) => stacked.select(0, r));
    const out = parts.length === 1 ? parts[0].clone() : cat(parts, dim);
    stacked.dispose();
    return out;
  });
}

/** This rank's chunk of `t` along `dim` (a contiguous copy); the size must divide evenly. */
export function chunkOf(group: ProcessGroup, t: Tensor, dim: number, what: string): Tensor {
  const d = dim < 0 ? dim + t.ndim : dim;
  const n = t.shape[d];
  if (n % group.size !== 0) {
    throw new RangeError(
      `${what}: dimension ${d} of a [${t.shape}] tensor (${n}) is not divisible by the ` +
        `tensor-parallel size ${group.size}`,
    );
  }
  const len = n / group.size;
  return noGrad(() => t.narrow(d, group.rank * len, len).contiguous());
}

/**
 * The sum over ranks of `t`, keeping this rank's chunk along `dim` (a reduce-scatter, with `dim`
 * moved to the front first: the collective scatters the flat tensor).
 */
export function reduceScattered(
  group: ProcessGroup,
  t: Tensor,
  dim: number,
  what: string,
): Tensor {
  const d = dim < 0 ? dim + t.ndim : dim;
  if (t.shape[d] % group.size !== 0) return chunkOf(group, t, dim, what); // throws, naming it
  return noGrad(() => {
    const front = d === 0 ? t.contiguous() : t.transpose(0, d).contiguous();
    const shape = [front.shape[0] / group.size, ...front.shape.slice(1)];
    const out = Tensor.empty(shape, t.dtype, false, t.device);
    try {
      group.reduceScatterBlocking(out, front);
    } catch (err) {
      out.dispose();
      throw err;
    } finally {
      if (front !== t) front.dispose();
    }
    if (d === 0) return out;
    const back = out.transpose(0, d).contiguous();
    out.dispose();
    return back;
  });
}
