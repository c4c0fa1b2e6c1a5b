// The tensors of the bf16 / f16 safetensors fixtures (tests/fixtures/gen_half.py), made in dtrain
// from the bits half.json lists.

import { type Tensor, tensor } from "../../mod.ts";
import { type FileTensor, fixture } from "../tensor/_half_fixture.ts";

/** The tensor of `entry`'s dtype, shape and bits. */
export function fromBits(entry: FileTensor): Tensor {
  if (entry.dtype === "f32") {
    return tensor(new Float32Array(Uint32Array.from(entry.bits).buffer), entry.shape);
  }
  return tensor(Uint16Array.from(entry.bits), entry.shape).view(entry.dtype);
}

/** What gen_half.ts saves as half_dtrain.safetensors. */
export function dtrainFileTensors(): Record<string, Tensor> {
  const entries = Object.entries(fixture.dtrainFile.tensors);
  return Object.fromEntries(entries.map(([name, entry]) => [name, fromBits(entry)]));
}
