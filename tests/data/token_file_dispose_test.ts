// The mappings behind TokenFile and DistributedDataLoader: released by dispose()/close() (the
// kernel's list of this process's mappings, /proc/self/maps, no longer names the file), refused
// clearly after it, and the edge cases of mapping a file (empty, odd length, missing, changed).
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { data } from "../../mod.ts";
import { runDeno } from "../_harness/processes.ts";

/** Whether this process maps `path` now. */
function mapped(path: string): boolean {
  return Deno.readTextFileSync("/proc/self/maps").split("\n").some((line) => line.endsWith(path));
}

function withDir(fn: (dir: string) => void | Promise<void>): () => Promise<void> {
  return async () => {
    const dir = Deno.makeTempDirSync({ prefix: "dtrain_dispose_" });
    try {
      await fn(dir);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

/** Writes `n` tokens 0, 1, 2, ... as a nanoGPT .bin file. */
function writeTokens(path: string, n: number): void {
  Deno.writeFileSync(path, new Uint8Array(Uint16Array.from({ length: n }, (_, i) => i).buffer));
}

/** Writes an llm.c shard of tokens 0, 1, 2, ... */
function writeShard(path: string, n: number): void {
  const bytes = new Uint8Array(1024 + 2 * n);
  bytes.set(new Uint8Array(Int32Array.of(20240520, 1, n).buffer));
  bytes.set(new Uint8Array(Uint16Array.from({ length: n }, (_, i) => i).buffer), 1024);
  Deno.writeFileSync(path, bytes);
}

Deno.test(
  "TokenFile.dispose() unmaps the file, empties views of its tokens, and reads after it throw",
  withDir((dir) => {
    const path = join(dir, "train.bin");
    writeTokens(path, 100);
    const file = data.TokenFile.openSync(path);
    assert.ok(mapped(path), "not in /proc/self/maps while open");
    const view = file.tokens;
    assert.equal(view[99], 99);
    file.dispose();
    assert.ok(!mapped(path), "still in /proc/self/maps after dispose()");
    assert.equal(view.length, 0, "a view of the tokens outlived the mapping");
    assert.equal(file.length, 100);
    assert.ok(file.disposed);
    const unmapped = /train\.bin was unmapped by dispose\(\); open it again/;
    assert.throws(() => file.getBatch(2, 4), /^Error: getBatch: .*train\.bin was unmapped/);
    assert.throws(() => file.batchAt([0], 4), unmapped);
    assert.throws(() => file.tokens, unmapped);
    assert.throws(() => file.toTensor(), unmapped);
    file.dispose(); // idempotent
    {
      using scoped = data.TokenFile.openSync(path);
      assert.deepStrictEqual(scoped.batchAt([3], 2)[0].tolist(), [[3, 4]]);
    }
    assert.ok(!mapped(path), "`using` left the file mapped");
  }),
);

Deno.test(
  "DistributedDataLoader maps one shard at a time and close() unmaps it; reset() maps it again",
  withDir((dir) => {
    const [a, b] = [join(dir, "s_000.bin"), join(dir, "s_001.bin")];
    writeShard(a, 9);
    writeShard(b, 9);
    const loader = new data.DistributedDataLoader(`${dir}/s_*.bin`, 2, 2);
    assert.ok(mapped(a) && !mapped(b));
    loader.nextBatch();
    loader.nextBatch();
    loader.nextBatch(); // the second shard's first batch
    assert.ok(!mapped(a) && mapped(b), "moving to the next shard left the first one mapped");
    loader.close();
    assert.ok(!mapped(a) && !mapped(b), "close() left a shard mapped");
    assert.throws(() => loader.nextBatch(), /DistributedDataLoader is closed; reset\(\) reopens/);
    loader.reset();
    assert.deepStrictEqual(loader.nextBatch()[0].tolist(), [[0, 1], [2, 3]]);
    loader[Symbol.dispose]();
    assert.ok(!mapped(a));
  }),
);

Deno.test(
  "an empty token file maps to no tokens, and is refused for a batch by name",
  withDir((dir) => {
    const path = join(dir, "empty.bin");
    Deno.writeFileSync(path, new Uint8Array(0));
    using file = data.TokenFile.openSync(path);
    assert.equal(file.length, 0);
    assert.equal(file.tokens.length, 0);
    assert.throws(
      () => file.getBatch(1, 1),
      /empty\.bin holds 0 tokens, fewer than blockSize \+ 1/,
    );
  }),
);

Deno.test(
  "a relative path that is missing or of odd length is named by its absolute path",
  withDir((dir) => {
    const odd = join(dir, "odd.bin");
    Deno.writeFileSync(odd, new Uint8Array(7));
    assert.throws(
      () => data.TokenFile.openSync(relative(Deno.cwd(), odd)),
      (e: Error) =>
        e instanceof RangeError &&
        e.message.startsWith(`${odd}: 7 bytes is not a whole number of uint16 tokens`),
    );
    const absent = join(dir, "absent.bin");
    assert.throws(
      () => data.TokenFile.openSync(relative(Deno.cwd(), absent)),
      (e: Error) => e.message === `${absent}: cannot read it (no such file)`,
    );
    assert.throws(
      () => new data.DistributedDataLoader([relative(Deno.cwd(), absent)], 1, 1),
      (e: Error) => e.message === `${absent}: cannot read it (no such file)`,
    );
  }),
);

Deno.test(
  "a shard that changed size after the loader checked its header is refused when reached",
  withDir((dir) => {
    const [a, b] = [join(dir, "s_000.bin"), join(dir, "s_001.bin")];
    writeShard(a, 5);
    writeShard(b, 5);
    using loader = new data.DistributedDataLoader([a, b], 2, 2);
    Deno.writeFileSync(b, new Uint8Array(2), { append: true });
    loader.nextBatch();
    assert.throws(
      () => loader.nextBatch(),
      new RegExp(`^Error: ${b}: 1036 bytes now, 1034 when its header was checked`),
    );
  }),
);

Deno.test(
  "a TokenFile dropped without dispose() is unmapped once collected, not while a view of it lives",
  withDir(async (dir) => {
    const path = join(dir, "train.bin");
    writeTokens(path, 100);
    const run = await runDeno({
      args: [new URL("./_dropped_mapping.ts", import.meta.url).pathname, path],
      timeoutMs: 60_000,
    });
    assert.equal(run.code, 0, run.stderr);
    assert.deepStrictEqual(JSON.parse(run.stdout.trim().split("\n").at(-1)!), {
      viewAfterGc: { mapped: true, last: 99 },
      droppedAfterGc: { mapped: false },
    });
  }),
);
