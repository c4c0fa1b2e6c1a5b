// A checkpoint in the first sharded index format ("dtrain-sharded/1": dim-0 row ranges, written by
// FSDP on 2 ranks before the N-D boxes of format 2) still loads, in one process, to exactly what the
// old code loaded from it (tests/fixtures/sharded_v1/expected.safetensors, by gen_sharded_v1.ts).
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { load, loadSharded, readShardedMetadata } from "../../src/checkpoint/mod.ts";
import { build } from "../fixtures/gen_sharded_v1.ts";

const dir = fileURLToPath(new URL("../fixtures/sharded_v1", import.meta.url));

Deno.test("a format-1 sharded checkpoint loads in one process to what the old code loaded", () => {
  const index = JSON.parse(Deno.readTextFileSync(`${dir}/index.json`));
  assert.equal(index.format, "dtrain-sharded/1");
  assert.equal(readShardedMetadata(dir)?.worldSize, 2);
  const { model, optimizer } = build();
  const extra = loadSharded(dir, { model, optimizer });
  assert.deepEqual(extra, { step: 1 });
  const expected = load(`${dir}/expected.safetensors`);
  const want = expected.tensors;
  for (const [name, t] of Object.entries(model.stateDict())) {
    assert.deepEqual(Array.from(t.toArray()), Array.from(want[`model/${name}`].toArray()), name);
  }
  for (const [fqn, p] of model.namedParameters()) {
    for (const [field, v] of Object.entries(optimizer.state.get(p) ?? {})) {
      if (typeof v === "number") {
        assert.equal(String(v), expected.metadata[`${fqn}/${field}`], `${fqn}/${field}`);
      } else {
        const got = Array.from(v.toArray()), key = `optim/${fqn}/${field}`;
        assert.deepEqual(got, Array.from(want[key].toArray()), key);
      }
    }
  }
});
