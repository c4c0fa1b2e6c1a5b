// load() refuses malformed files with an error naming the file and the problem, and never
// crashes, leaks native memory or throws anything but a CheckpointError on bad content.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { CheckpointError, load, save } from "../../src/checkpoint/mod.ts";
import { allocatedBytes } from "../../mod.ts";
import { withTempDir } from "./_temp_dir.ts";

const fixture = Deno.readFileSync(
  fileURLToPath(new URL("../fixtures/mlp_torch.safetensors", import.meta.url)),
);

/** A safetensors file from raw parts: the header text, `dataBytes` of data, the length field. */
function craft(header: string, dataBytes: number, length?: bigint): Uint8Array {
  const json = new TextEncoder().encode(header);
  const bytes = new Uint8Array(8 + json.length + dataBytes);
  new DataView(bytes.buffer).setBigUint64(0, length ?? BigInt(json.length), true);
  bytes.set(json, 8);
  return bytes;
}

/** The header of one F32 tensor per entry: name -> [shape, begin, end]. */
function f32Header(tensors: Record<string, [number[], number, number]>): string {
  const entries = Object.entries(tensors).map(([name, [shape, begin, end]]) => [
    name,
    { dtype: "F32", shape, data_offsets: [begin, end] },
  ]);
  return JSON.stringify(Object.fromEntries(entries));
}

/** Writes `bytes` as `name` in `dir` and asserts that load() refuses it with `problem`. */
function assertRefused(dir: string, name: string, bytes: Uint8Array, problem: string | RegExp) {
  const path = `${dir}/${name}`;
  Deno.writeFileSync(path, bytes);
  const before = allocatedBytes();
  assert.throws(() => load(path), (error: unknown) => {
    assert.ok(error instanceof CheckpointError, `expected a CheckpointError, got ${error}`);
    assert.equal(error.path, path);
    if (typeof problem === "string") assert.equal(error.message, `${path}: ${problem}`);
    else assert.match(error.message, problem);
    return true;
  });
  assert.equal(allocatedBytes(), before, "no native memory kept after a refusal");
}

Deno.test(
  "load() refuses a file shorter than the 8-byte header length",
  withTempDir((dir) => {
    assertRefused(
      dir,
      "short.safetensors",
      new Uint8Array(5),
      "file is 5 bytes, too short for the 8-byte header length",
    );
  }),
);

Deno.test(
  "load() refuses a header length over 100 MB, up to 2^64 - 1",
  withTempDir((dir) => {
    for (const length of [100_000_001n, 2n ** 64n - 1n]) {
      assertRefused(
        dir,
        "huge.safetensors",
        craft("{}", 0, length),
        `header length ${length} exceeds the limit of 100000000 bytes`,
      );
    }
  }),
);

Deno.test(
  "load() refuses a truncated header (header length past the end of the file)",
  withTempDir((dir) => {
    assertRefused(
      dir,
      "truncated_header.safetensors",
      fixture.subarray(0, 200),
      "header length 424 runs past the end of the 200-byte file",
    );
  }),
);

Deno.test(
  "load() refuses truncated data, naming the tensor that runs past the end",
  withTempDir((dir) => {
    assertRefused(
      dir,
      "truncated_data.safetensors",
      fixture.subarray(0, fixture.length - 4),
      'tensor "4.weight" has data_offsets [1680, 1936] but the data region after the header ' +
        "holds only 1932 bytes (truncated file?)",
    );
  }),
);

Deno.test(
  "load() refuses trailing bytes after the last tensor",
  withTempDir((dir) => {
    const longer = new Uint8Array(fixture.length + 3);
    longer.set(fixture);
    assertRefused(
      dir,
      "trailing.safetensors",
      longer,
      "3 trailing bytes: the tensors cover 1936 bytes of the 1939-byte data region",
    );
  }),
);

Deno.test(
  "load() refuses data_offsets whose size does not match shape and dtype",
  withTempDir((dir) => {
    assertRefused(
      dir,
      "byte_count.safetensors",
      craft(f32Header({ "0.weight": [[4, 8], 0, 100] }), 100),
      'tensor "0.weight" has data_offsets [0, 100] but shape [4, 8] F32 needs 128 bytes',
    );
    assertRefused(
      dir,
      "backwards.safetensors",
      craft(f32Header({ b: [[2], 8, 0] }), 8),
      'tensor "b" has data_offsets [8, 0], which end before they begin',
    );
  }),
);

Deno.test(
  "load() refuses overlapping tensors",
  withTempDir((dir) => {
    assertRefused(
      dir,
      "overlap.safetensors",
      craft(f32Header({ a: [[4], 0, 16], b: [[4], 8, 24] }), 24),
      'tensor "b" at data_offsets [8, 24] overlaps tensor "a" at [0, 16]',
    );
  }),
);

Deno.test(
  "load() refuses a hole between tensors and before the first one",
  withTempDir((dir) => {
    assertRefused(
      dir,
      "hole.safetensors",
      craft(f32Header({ a: [[4], 0, 16], b: [[4], 20, 36] }), 36),
      '4 unused bytes between tensor "a" (ends at 16) and tensor "b" (begins at 20)',
    );
    assertRefused(
      dir,
      "hole_first.safetensors",
      craft(f32Header({ a: [[2], 8, 16] }), 16),
      '8 unused bytes between the start of the data region and tensor "a" (begins at 8)',
    );
  }),
);

Deno.test(
  "load() refuses I64 and unknown dtypes, naming the tensor (F16 and BF16 load: half_test.ts)",
  withTempDir((dir) => {
    for (const [dtype, bytes] of [["I64", 8], ["Q4", 4], ["F64", 8], ["F8_E4M3", 1]] as const) {
      const header = JSON.stringify({
        "emb.weight": { dtype, shape: [2, 3], data_offsets: [0, 6 * bytes] },
      });
      assertRefused(
        dir,
        `${dtype}.safetensors`,
        craft(header, 6 * bytes),
        `tensor "emb.weight" has unsupported dtype "${dtype}" (dtrain reads F32, BF16, F16, I32 and U16${
          dtype === "I64" ? "; convert int64 tensors to int32 before saving" : ""
        })`,
      );
    }
  }),
);

Deno.test(
  "load() refuses a header that is not JSON, not UTF-8, or not an object",
  withTempDir((dir) => {
    assertRefused(
      dir,
      "not_json.safetensors",
      craft("{not json", 0),
      /: header \(9 bytes\) is not valid JSON: /,
    );
    const latin1 = craft('{"a":1}', 0);
    latin1[10] = 0xff;
    assertRefused(dir, "not_utf8.safetensors", latin1, "header (7 bytes) is not valid UTF-8");
    assertRefused(
      dir,
      "array.safetensors",
      craft("[1, 2]", 0),
      "header is [1,2], not a JSON object",
    );
  }),
);

Deno.test(
  "load() refuses malformed tensor entries and metadata",
  withTempDir((dir) => {
    const cases: [string, string, number, string][] = [
      ["entry", '{"w": [1, 2]}', 0, 'tensor "w" is [1,2], not an object'],
      [
        "no_dtype",
        '{"w": {"shape": [], "data_offsets": [0, 4]}}',
        4,
        'tensor "w" has dtype undefined',
      ],
      [
        "negative_dim",
        '{"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 0]}}',
        0,
        'tensor "w" has shape [2,-1]; dimensions must be non-negative integers',
      ],
      [
        "fractional_dim",
        '{"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 6]}}',
        6,
        'tensor "w" has shape [1.5]; dimensions must be non-negative integers',
      ],
      [
        "offsets",
        '{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}',
        4,
        'tensor "w" has data_offsets [0], not [begin, end] byte offsets',
      ],
      [
        "huge_shape",
        '{"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}}',
        4,
        'tensor "w" has data_offsets [0, 4] but shape [4294967296, 4294967296] F32 needs ' +
        "73786976294838210000 bytes",
      ],
      ["metadata", '{"__metadata__": ["pt"]}', 0, '__metadata__ is ["pt"], not an object'],
      [
        "metadata_value",
        '{"__metadata__": {"step": 100}}',
        0,
        '__metadata__ maps "step" to 100, not to a string',
      ],
    ];
    for (const [name, header, dataBytes, problem] of cases) {
      assertRefused(dir, `${name}.safetensors`, craft(header, dataBytes), problem);
    }
  }),
);

Deno.test(
  "load() of every truncation and of 500 random header corruptions of the fixture never crashes",
  withTempDir((dir) => {
    const path = `${dir}/fuzz.safetensors`;
    const before = allocatedBytes();
    // One file changed in place: creating a file per case would dominate the run time.
    Deno.writeFileSync(path, fixture);
    using file = Deno.openSync(path, { read: true, write: true });
    let seed = 12345;
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
    for (let i = 0; i < 500; i++) {
      const positions = Array.from({ length: 1 + Math.floor(next() * 3) }, () => {
        return Math.floor(next() * 432); // the length field and the header
      });
      for (const at of positions) {
        file.seekSync(at, Deno.SeekMode.Start);
        file.writeSync(Uint8Array.of(Math.floor(next() * 256)));
      }
      try {
        for (const t of Object.values(load(path).tensors)) t.dispose();
      } catch (error) {
        if (!(error instanceof CheckpointError)) throw error;
      }
      for (const at of positions) {
        file.seekSync(at, Deno.SeekMode.Start);
        file.writeSync(fixture.subarray(at, at + 1));
      }
    }
    for (let length = fixture.length - 1; length >= 0; length--) {
      file.truncateSync(length);
      assert.throws(() => load(path), CheckpointError, `cut to ${length} bytes`);
    }
    assert.equal(allocatedBytes(), before, "no native memory leaked");
  }),
);

Deno.test(
  "load() accepts what the reference accepts: any key order, empty tensors, no metadata",
  withTempDir((dir) => {
    const path = `${dir}/reordered.safetensors`;
    const header = f32Header({ b: [[2], 8, 16], e: [[0, 5], 8, 8], a: [[2], 0, 8] });
    const bytes = craft(header + "   ", 16);
    bytes.set(new Uint8Array(Float32Array.of(1, 2, 3, 4).buffer), bytes.length - 16);
    Deno.writeFileSync(path, bytes);
    const { tensors, metadata } = load(path);
    assert.deepEqual(Array.from(tensors.a.toArray()), [1, 2]);
    assert.deepEqual(Array.from(tensors.b.toArray()), [3, 4]);
    assert.deepEqual(tensors.e.shape, [0, 5]);
    assert.deepEqual(metadata, {});
    save(`${dir}/copy.safetensors`, tensors);
    assert.deepEqual(Object.keys(load(`${dir}/copy.safetensors`).tensors), ["a", "b", "e"]);
  }),
);

Deno.test(
  "load() refuses a header that names a tensor twice, or a field of one twice, naming the key",
  withTempDir((dir) => {
    const entry = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}';
    assertRefused(
      dir,
      "twice.safetensors",
      craft(`{"w":${entry},"w" : ${entry}}`, 4),
      'duplicate key "w": the header names it twice',
    );
    assertRefused(
      dir,
      "field_twice.safetensors",
      craft('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"dtype":"I32"}}', 4),
      'duplicate key "dtype": it appears twice in the entry of "w"',
    );
    assertRefused(
      dir,
      "meta_twice.safetensors",
      craft(`{"__metadata__":{"a":"1","a":"2"},"w":${entry}}`, 4),
      'duplicate key "a": it appears twice in the entry of "__metadata__"',
    );
    // An escaped key equal to another is the same key.
    assertRefused(
      dir,
      "escaped.safetensors",
      craft(`{"w":${entry},"\\u0077":${entry}}`, 4),
      'duplicate key "w": the header names it twice',
    );
  }),
);
