/**
 * The average of a flat f32 pseudo-gradient over a group, sent in f32, bf16 or int8, and what this
 * rank's contribution lost to the rounding (for DiLoCo's error feedback).
 * @module
 */

import type { ProcessGroup } from "../distributed/mod.ts";
import { tensor } from "../tensor/creation.ts";
import { noGrad } from "../tensor/grad_mode.ts";
import type { Tensor } from "../tensor/tensor.ts";

/** The type a pseudo-gradient travels in: int8 carries one f32 scale per parameter. */
export type PseudoGradientDtype = "f32" | "bf16" | "int8";

/** One parameter's run of the flat pseudo-gradient; int8 gives each its own scale. */
export interface Segment {
  /** The parameter's name, for errors. */
  name: string;
  /** Its element count. */
  numel: number;
}

/** What `averageOverGroup` gives back. */
export interface CompressedAverage {
  /** The group's average, f32 and flat like the input. */
  average: Tensor;
  /** This rank's input minus what it sent, f32 (null for f32, which loses nothing). */
  lost: Tensor | null;
  /** The bytes this rank sent into the collective. */
  bytes: number;
}

/** The largest int8 magnitude used: a symmetric range, so that 0 is exact and -x sends as -q. */
const INT8_LEVELS = 127;

/**
 * Averages `flat` (f32, consumed) over `group` in `dtype`.
 *
 * - f32: an all-reduce "avg" on it.
 * - bf16: rounded to bf16 (to nearest even), all-reduced "avg" in bf16, widened back.
 * - int8: every segment scaled by its own max|x|/127 and rounded to the nearest integer; the ranks
 *   all-gather the int8 values with their scales (a sum of integers on different scales means
 *   nothing, so nothing is summed on the wire) and each rank adds the dequantised contributions in
 *   rank order, so every rank gets the same bits. The quantising runs on the host: a sync comes
 *   once every many steps and the wire, not the copy, is what int8 is for.
 *
 * @throws RangeError naming the parameter, for int8, when its pseudo-gradient is not finite.
 */
export async function averageOverGroup(
  flat: Tensor,
  dtype: PseudoGradientDtype,
  segments: readonly Segment[],
  group: ProcessGroup,
): Promise<CompressedAverage> {
  if (dtype === "f32") {
    await group.allReduce(flat, "avg").wait();
    return { average: flat, lost: null, bytes: flat.numel() * 4 };
  }
  if (dtype === "bf16") {
    const { wire, lost } = noGrad(() => {
      const wire = flat.to("bf16");
      return { wire, lost: flat.sub(wire.to("f32")) };
    });
    await group.allReduce(wire, "avg").wait();
    return { average: noGrad(() => wire.to("f32")), lost, bytes: wire.numel() * 2 };
  }
  return await averageInt8(flat, segments, group);
}

/** The int8 path of `averageOverGroup`: one all-gather of [scales as f32 | int8 values] words. */
async function averageInt8(
  flat: Tensor,
  segments: readonly Segment[],
  group: ProcessGroup,
): Promise<CompressedAverage> {
  const x = flat.toArray() as Float32Array;
  const words = segments.length + Math.ceil(x.length / 4);
  const packed = new Int32Array(words);
  const sent = encodeInt8(x, segments, packed);
  const lost = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) lost[i] = x[i] - sent[i];
  const device = flat.device;
  const input = tensor(packed, [words], { dtype: "i32", device });
  const gathered = input.newEmpty([group.size * words], { dtype: "i32" });
  await group.allGather(gathered, input).wait();
  const all = gathered.toArray() as Int32Array;
  const sum = new Float64Array(x.length);
  for (let r = 0; r < group.size; r++) {
    const contribution = decodeInt8(all.slice(r * words, (r + 1) * words), segments, x.length);
    for (let i = 0; i < x.length; i++) sum[i] += contribution[i];
  }
  const average = Float32Array.from(sum, (v) => v / group.size);
  input.dispose();
  gathered.dispose();
  return {
    average: tensor(average, [x.length], { device }),
    lost: tensor(lost, [x.length], { device }),
    bytes: words * 4,
  };
}

/**
 * Writes `x`'s int8 form into `packed` (the segments' f32 scales, then the values four to a word)
 * and returns the values it stands for, as the receivers will decode them.
 */
function encodeInt8(
  x: Float32Array,
  segments: readonly Segment[],
  packed: Int32Array,
): Float32Array {
  const scales = new Float32Array(packed.buffer, 0, segments.length);
  const q = new Int8Array(packed.buffer, segments.length * 4, x.length);
  let start = 0;
  segments.forEach(({ name, numel }, s) => {
    let maxAbs = 0;
    for (let i = start; i < start + numel; i++) maxAbs = Math.max(maxAbs, Math.abs(x[i]));
    if (!Number.isFinite(maxAbs)) {
      throw new RangeError(`DiLoCo: the pseudo-gradient of ${name} is not finite (${maxAbs})`);
    }
    scales[s] = maxAbs / INT8_LEVELS;
    const scale = scales[s];
    for (let i = start; i < start + numel; i++) {
      q[i] = scale === 0
        ? 0
        : Math.max(-INT8_LEVELS, Math.min(INT8_LEVELS, Math.round(x[i] / scale)));
    }
    start += numel;
  });
  return decodeInt8(packed, segments, x.length);
}

/** The f32 values that `packed` (from `encodeInt8`) stands for. */
function decodeInt8(packed: Int32Array, segments: readonly Segment[], count: number): Float32Array {
  const scales = new Float32Array(packed.buffer, packed.byteOffset, segments.length);
  const q = new Int8Array(packed.buffer, packed.byteOffset + segments.length * 4, count);
  const values = new Float32Array(count);
  let start = 0;
  segments.forEach(({ numel }, s) => {
    for (let i = start; i < start + numel; i++) values[i] = q[i] * scales[s];
    start += numel;
  });
  return values;
}
