// A save that fails leaves the previous checkpoint as it was and no temporary file behind.

import assert from "node:assert/strict";
import { CheckpointError, load, save } from "../../src/checkpoint/mod.ts";
import { randn, tensor } from "../../mod.ts";
import { withTempDir } from "./_temp_dir.ts";

/** Root ignores permission bits, so a read-only folder stops only other users. */
const runsAsRoot = Deno.uid() === 0;

/** Saves a first checkpoint at `path` and returns its bytes. */
function saveOriginal(path: string): Uint8Array {
  save(path, { w: tensor([1, 2, 3]) }, { step: "1" });
  return Deno.readFileSync(path);
}

function assertUntouched(dir: string, path: string, original: Uint8Array): void {
  assert.deepEqual(Deno.readFileSync(path), original, "the previous checkpoint is unchanged");
  assert.deepEqual(
    [...Deno.readDirSync(dir)].map((e) => e.name),
    [path.slice(dir.length + 1)],
    "no temporary file left behind",
  );
}

Deno.test(
  "save() with a tensor disposed mid-list fails, naming it, and keeps the previous file",
  withTempDir((dir) => {
    const path = `${dir}/model.safetensors`;
    const original = saveOriginal(path);
    const disposed = randn([4, 4]);
    disposed.dispose();
    assert.throws(
      () => save(path, { "0.weight": randn([64, 64]), "1.weight": disposed, "2.bias": randn([4]) }),
      {
        name: "CheckpointError",
        message: `${path}: cannot save: tensor "1.weight" [4,4] f32 was disposed`,
      },
    );
    assertUntouched(dir, path, original);
  }),
);

Deno.test(
  "save() that fails at the final rename removes its temporary file",
  withTempDir((dir) => {
    // A non-empty folder cannot be replaced by a file: the whole data is written, then rename fails.
    const path = `${dir}/model.safetensors`;
    Deno.mkdirSync(path);
    Deno.writeTextFileSync(`${path}/keep.txt`, "kept");
    assert.throws(() => save(path, { w: randn([256, 256]) }), Deno.errors.IsADirectory);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["model.safetensors"]);
    assert.equal(Deno.readTextFileSync(`${path}/keep.txt`), "kept");
  }),
);

Deno.test({
  name: "save() into a read-only folder fails and keeps the previous file",
  ignore: runsAsRoot,
  fn: withTempDir((dir) => {
    const path = `${dir}/model.safetensors`;
    const original = saveOriginal(path);
    Deno.chmodSync(dir, 0o555);
    try {
      assert.throws(() => save(path, { w: tensor([9]) }), Deno.errors.PermissionDenied);
    } finally {
      Deno.chmodSync(dir, 0o755);
    }
    assertUntouched(dir, path, original);
  }),
});

Deno.test(
  "save() refuses bad arguments before touching the file",
  withTempDir((dir) => {
    const path = `${dir}/model.safetensors`;
    const original = saveOriginal(path);
    const cases: [() => void, string][] = [
      [
        () => save(path, { __metadata__: tensor([1]) }),
        'cannot save: "__metadata__" is reserved and cannot name a tensor',
      ],
      [
        () => save(path, { w: [1, 2] as unknown as ReturnType<typeof tensor> }),
        'cannot save: "w" is not a Tensor',
      ],
      [
        () => save(path, { w: tensor([1]) }, { step: 5 as unknown as string }),
        'cannot save: metadata "step" is number, not a string',
      ],
    ];
    for (const [call, problem] of cases) {
      assert.throws(call, (error: unknown) => {
        assert.ok(error instanceof CheckpointError);
        assert.equal(error.message, `${path}: ${problem}`);
        return true;
      });
    }
    assertUntouched(dir, path, original);
    assert.deepEqual(load(path).metadata, { step: "1" });
  }),
);
