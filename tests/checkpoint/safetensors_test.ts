// save() then load(): values, shapes, dtypes and metadata survive, and the file has the layout the
// safetensors reference implementation writes.

import assert from "node:assert/strict";
import { load, save } from "../../src/checkpoint/mod.ts";
import { allocatedBytes, arange, randn, type Tensor, tensor } from "../../mod.ts";
import { withTempDir } from "./_temp_dir.ts";

/** The header length and the parsed header JSON of a safetensors file. */
function readHeader(path: string): { length: number; text: string; json: Record<string, unknown> } {
  const bytes = Deno.readFileSync(path);
  const length = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const text = new TextDecoder().decode(bytes.subarray(8, 8 + length));
  return { length, text, json: JSON.parse(text) };
}

function assertSameTensor(actual: Tensor, expected: Tensor, name: string): void {
  assert.deepEqual(actual.shape, expected.shape, `${name}: shape`);
  assert.equal(actual.dtype, expected.dtype, `${name}: dtype`);
  assert.ok(actual.isContiguous(), `${name}: contiguous`);
  assert.deepEqual(actual.toArray(), expected.toArray(), `${name}: values`);
}

Deno.test(
  "save() then load() round-trips f32 and i32 tensors of every rank, scalar and empty included",
  withTempDir((dir) => {
    const path = `${dir}/round_trip.safetensors`;
    const tensors: Record<string, Tensor> = {
      scalar: tensor([3.25], []),
      vector: tensor([1.5, -2, 1e-30, 3.4e38]),
      matrix: randn([3, 5]),
      cube: randn([2, 3, 4]),
      empty: tensor([], [0, 3]),
      "indices.i32": tensor(new Int32Array([7, -1, 2147483647, -2147483648]), [2, 2]),
      "scalar.i32": tensor([42], [], { dtype: "i32" }),
      "empty.i32": tensor([], [4, 0], { dtype: "i32" }),
    };
    save(path, tensors);
    const loaded = load(path);
    assert.deepEqual(Object.keys(loaded.tensors).sort(), Object.keys(tensors).sort());
    for (const [name, t] of Object.entries(tensors)) {
      assertSameTensor(loaded.tensors[name], t, name);
    }
    assert.deepEqual(loaded.metadata, {});
    assert.ok(!("__metadata__" in readHeader(path).json), "no __metadata__ unless given");
  }),
);

Deno.test(
  "save() writes non-contiguous tensors (transposed views) in row-major order",
  withTempDir((dir) => {
    const path = `${dir}/views.safetensors`;
    const base = arange(12, undefined, 1, { dtype: "f32" }).reshape(3, 4);
    const transposed = base.transpose(0, 1);
    const cube = arange(24, undefined, 1, { dtype: "i32" }).reshape(2, 3, 4).transpose(0, 2);
    assert.ok(!transposed.isContiguous() && !cube.isContiguous());
    const grad = randn([4, 2], { requiresGrad: true }).t();
    save(path, { transposed, cube, grad });
    const { tensors } = load(path);
    assert.deepEqual(tensors.transposed.shape, [4, 3]);
    assert.deepEqual(
      Array.from(tensors.transposed.toArray()),
      [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11],
    );
    assertSameTensor(tensors.cube, cube, "cube");
    assertSameTensor(tensors.grad, grad, "grad");
  }),
);

Deno.test(
  "save() then load() round-trips metadata, including non-ASCII and escaped strings",
  withTempDir((dir) => {
    const path = `${dir}/metadata.safetensors`;
    const metadata = {
      format: "pt",
      step: "1200",
      note: 'quote " backslash \\ newline \n tab \t ünïcödé 😀',
      "": "empty key",
      ["__proto__"]: "an ordinary key",
    };
    save(path, { w: tensor([1, 2]) }, metadata);
    assert.deepEqual(load(path).metadata, { ...metadata });
    assert.equal(load(path).metadata.__proto__, "an ordinary key");
  }),
);

Deno.test(
  "save() orders data like the reference: F32 before I32, each by UTF-8 name, with no gaps",
  withTempDir((dir) => {
    const path = `${dir}/order.safetensors`;
    save(path, {
      "b.i32": tensor([1, 2, 3], [3], { dtype: "i32" }),
      "a.i32": tensor([4], [1], { dtype: "i32" }),
      "10.weight": tensor([1, 2, 3, 4], [2, 2]),
      "2.weight": tensor([5, 6], [2]),
      "\u{1F600}": tensor([7], [1]), // above U+FFFF: UTF-16 would sort it before U+FF5E
      "\u{FF5E}": tensor([8], [1]),
    }, { format: "pt" });
    const { length, text, json } = readHeader(path);
    assert.equal(length % 8, 0, "header padded to a multiple of 8");
    assert.equal(text, text.trimEnd() + " ".repeat(text.length - text.trimEnd().length));
    assert.deepEqual(Object.keys(json), [
      "__metadata__",
      "10.weight",
      "2.weight",
      "\u{FF5E}",
      "\u{1F600}",
      "a.i32",
      "b.i32",
    ]);
    assert.deepEqual(json["10.weight"], { dtype: "F32", shape: [2, 2], data_offsets: [0, 16] });
    assert.deepEqual(json["2.weight"], { dtype: "F32", shape: [2], data_offsets: [16, 24] });
    assert.deepEqual(json["\u{1F600}"], { dtype: "F32", shape: [1], data_offsets: [28, 32] });
    assert.deepEqual(json["b.i32"], { dtype: "I32", shape: [3], data_offsets: [36, 48] });
    assert.equal(Deno.statSync(path).size, 8 + length + 48);
    assert.ok(text.startsWith('{"__metadata__":{"format":"pt"},"10.weight":{"dtype":"F32"'));
  }),
);

Deno.test(
  "save() streams a tensor larger than one 16 MiB chunk and load() reads it back",
  withTempDir((dir) => {
    const path = `${dir}/large.safetensors`;
    const big = randn([5, 1024, 1024]); // 20 MiB
    const tail = tensor([1, 2, 3]);
    save(path, { big, tail });
    const { tensors } = load(path);
    assertSameTensor(tensors.big, big, "big");
    assertSameTensor(tensors.tail, tail, "tail");
    for (const t of [big, tail, ...Object.values(tensors)]) t.dispose();
  }),
);

Deno.test(
  "save() replaces an existing file and leaves no temporary file behind",
  withTempDir((dir) => {
    const path = `${dir}/model.safetensors`;
    save(path, { w: tensor([1, 2, 3]) });
    save(path, { w: tensor([4, 5]), b: tensor([6]) });
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["model.safetensors"]);
    const { tensors } = load(path);
    assert.deepEqual(Array.from(tensors.w.toArray()), [4, 5]);
    assert.deepEqual(Array.from(tensors.b.toArray()), [6]);
  }),
);

Deno.test(
  "load() of a valid file allocates exactly its tensors, freed again by dispose()",
  withTempDir((dir) => {
    const path = `${dir}/memory.safetensors`;
    const w = randn([64, 32]);
    save(path, { w });
    const before = allocatedBytes();
    const { tensors } = load(path);
    assert.equal(allocatedBytes() - before, 64 * 32 * 4);
    tensors.w.dispose();
    assert.equal(allocatedBytes(), before);
  }),
);
