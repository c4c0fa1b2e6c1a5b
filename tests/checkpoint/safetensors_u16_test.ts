// u16 token tensors in safetensors files: saved as "U16" (2 bytes an element) after the F32 and
// I32 tensors, as the reference implementation orders dtypes, and loaded back as u16.

import assert from "node:assert/strict";
import { load, save } from "../../src/checkpoint/mod.ts";
import { tensor } from "../../mod.ts";
import { withTempDir } from "./_temp_dir.ts";

Deno.test(
  "save() writes u16 as U16 after F32 and I32, and load() reads it back as u16",
  withTempDir((dir) => {
    const path = `${dir}/tokens.safetensors`;
    const tokens = new Uint16Array([0, 1, 50256, 65535, 7]);
    save(path, {
      "a.tokens": tensor(tokens, [5]),
      "b.weight": tensor([1.5, -2], [2]),
      "c.index": tensor(new Int32Array([3]), [1]),
      // A strided view is written row-major: 2 bytes an element.
      "d.tokens": tensor(new Uint16Array([1, 2, 3, 4]), [2, 2]).t(),
    });
    const bytes = Deno.readFileSync(path);
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    const json = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
    assert.deepStrictEqual(Object.keys(json), ["b.weight", "c.index", "a.tokens", "d.tokens"]);
    assert.deepStrictEqual(json["a.tokens"], { dtype: "U16", shape: [5], data_offsets: [12, 22] });
    assert.deepStrictEqual(json["d.tokens"], {
      dtype: "U16",
      shape: [2, 2],
      data_offsets: [22, 30],
    });
    assert.equal(bytes.length, 8 + n + 30);
    const loaded = load(path).tensors;
    assert.equal(loaded["a.tokens"].dtype, "u16");
    assert.deepStrictEqual(loaded["a.tokens"].toArray(), tokens);
    assert.deepStrictEqual(loaded["d.tokens"].tolist(), [[1, 3], [2, 4]]);
    assert.deepStrictEqual(loaded["c.index"].toArray(), new Int32Array([3]));
  }),
);
