// The weights a training run ends with, read back from its safetensors files, and a bit-for-bit
// comparison that names the first tensor element that differs.
import assert from "node:assert/strict";
import { load } from "../../src/checkpoint/mod.ts";

/** The weights in a safetensors file (a snapshot's `model.` tensors, or a weight dump). */
export function weights(path: string, prefix = ""): Map<string, Float32Array> {
  const { tensors } = load(path);
  try {
    const found = new Map<string, Float32Array>();
    for (const [name, t] of Object.entries(tensors)) {
      if (name.startsWith(prefix)) {
        found.set(name.slice(prefix.length), t.toArray() as Float32Array);
      }
    }
    return found;
  } finally {
    for (const t of Object.values(tensors)) t.dispose();
  }
}

/** Throws naming the first tensor and element where `b` differs from `a` (bit for bit). */
export function assertSameWeights(
  a: Map<string, Float32Array>,
  b: Map<string, Float32Array>,
  what: string,
) {
  assert.deepEqual([...b.keys()].sort(), [...a.keys()].sort(), `${what}: tensor names`);
  for (const [name, x] of a) {
    const y = b.get(name)!;
    assert.equal(y.length, x.length, `${what}: ${name} length`);
    const bitsX = new Uint32Array(x.buffer, x.byteOffset, x.length);
    const bitsY = new Uint32Array(y.buffer, y.byteOffset, y.length);
    const at = bitsX.findIndex((bits, i) => bits !== bitsY[i]);
    assert.equal(at, -1, `${what}: ${name}[${at}] is ${y[at]}, expected ${x[at]}`);
  }
}
