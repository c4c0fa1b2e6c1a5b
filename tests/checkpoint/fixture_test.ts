// The PyTorch-made fixture: load() reads it exactly, and save() reproduces it byte for byte.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { load, save } from "../../src/checkpoint/mod.ts";
import { type Tensor, tensor } from "../../mod.ts";
import { withTempDir } from "./_temp_dir.ts";

const fixtures = new URL("../fixtures/", import.meta.url);
const fixturePath = fileURLToPath(new URL("mlp_torch.safetensors", fixtures));

interface ExpectedTensor {
  shape: number[];
  dtype: "f32";
  data: number[];
  safetensorsDtype: string;
  dataOffsets: [number, number];
}

const expected = JSON.parse(
  Deno.readTextFileSync(new URL("mlp_torch_expected.json", fixtures)),
) as {
  fileSize: number;
  sha256: string;
  headerLength: number;
  metadata: Record<string, string>;
  tensors: Record<string, ExpectedTensor>;
};

Deno.test("load() reads PyTorch's mlp_torch.safetensors: names, shapes and exact values", () => {
  const { tensors, metadata } = load(fixturePath);
  assert.deepEqual(metadata, expected.metadata);
  assert.deepEqual(Object.keys(tensors).sort(), Object.keys(expected.tensors).sort());
  for (const [name, want] of Object.entries(expected.tensors)) {
    const got = tensors[name];
    assert.deepEqual(got.shape, want.shape, `${name}: shape`);
    assert.equal(got.dtype, want.dtype, `${name}: dtype`);
    assert.deepEqual(got.toArray(), Float32Array.from(want.data), `${name}: values`);
  }
  assert.deepEqual(tensors["0.weight"].shape, [16, 8], "Linear weights are [out, in]");
});

Deno.test(
  "save() of the fixture's tensors with {format: pt} is byte-identical to PyTorch's file",
  withTempDir((dir) => {
    const path = `${dir}/mlp.safetensors`;
    // Insertion order deliberately differs from the file's: save() sorts.
    const names = Object.keys(expected.tensors).reverse();
    const tensors: Record<string, Tensor> = {};
    for (const name of names) {
      const want = expected.tensors[name];
      tensors[name] = tensor(Float32Array.from(want.data), want.shape);
    }
    save(path, tensors, { format: "pt" });
    const written = Deno.readFileSync(path);
    const original = Deno.readFileSync(fixturePath);
    assert.equal(written.length, expected.fileSize);
    assert.equal(Number(new DataView(written.buffer).getBigUint64(0, true)), expected.headerLength);
    assert.deepEqual(written, original);
    assert.equal(createHash("sha256").update(written).digest("hex"), expected.sha256);
  }),
);
