// Token files larger than memory: a sparse 20 GB nanoGPT .bin file and a sparse 4.3 GB llm.c
// shard, with known tokens written at scattered offsets (the very end included), served batch by
// batch through the mapping by a fresh process (_mapped_batches.ts) whose resident memory peaks
// under 300 MiB. Reading either file whole would hold gigabytes.
import assert from "node:assert/strict";
import { join } from "node:path";
import { runDeno } from "../_harness/processes.ts";

const MiB = 2 ** 20;
/** The peak resident memory a process may reach while serving batches of a 20 GB file. */
const RSS_LIMIT = 300 * MiB;

/** Runs _mapped_batches.ts on `spec`: the rows it read and its memory. */
async function mappedBatches(
  spec: Record<string, unknown>,
): Promise<{ x: number[][]; y: number[][]; rss: number; peak: number }> {
  const run = await runDeno({
    args: [new URL("./_mapped_batches.ts", import.meta.url).pathname, JSON.stringify(spec)],
    timeoutMs: 120_000,
  });
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout.trim().split("\n").at(-1)!);
}
/**
 * Makes `path` a sparse file of `bytes` (no blocks on disk but those written), halving the size
 * where the file system refuses it; returns the size made.
 */
function sparseFile(path: string, bytes: number): number {
  Deno.writeFileSync(path, new Uint8Array(0));
  for (let size = bytes;; size = Math.floor(size / 4) * 2) {
    try {
      Deno.truncateSync(path, size);
      return size;
    } catch (error) {
      if (size < 2 ** 30) throw error;
    }
  }
}

/** Writes `tokens` (u16 little-endian) at byte `at` of `path`. */
function writeAt(path: string, at: number, tokens: Uint16Array): void {
  using file = Deno.openSync(path, { write: true });
  file.seekSync(at, Deno.SeekMode.Start);
  const bytes = new Uint8Array(tokens.buffer);
  for (let done = 0; done < bytes.length;) done += file.writeSync(bytes.subarray(done));
}

/** `n` tokens that differ from offset to offset and from zero (the sparse file's holes). */
function knownTokens(n: number, seed: number): Uint16Array {
  return Uint16Array.from({ length: n }, (_, i) => 1 + ((seed * 7919 + i * 104729) % 50256));
}

function withTempDir(fn: (dir: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const dir = Deno.makeTempDirSync({ prefix: "dtrain_mmap_" });
    try {
      await fn(dir);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

Deno.test(
  "TokenFile serves exact batches at scattered offsets of a sparse 20 GB file within 300 MiB RSS",
  withTempDir(async (dir) => {
    const path = join(dir, "train.bin");
    const size = sparseFile(path, 20e9);
    const length = size / 2, blockSize = 1024;
    // The first window, one past 2^31 and one across 2^32 tokens (offsets beyond 32 bits), one in
    // the middle and the last window that fits (it ends on the file's last token).
    const offsets = [0, 2 ** 31 + 5, 2 ** 32 - 100, Math.floor(length / 2) + 3]
      .filter((o) => o + blockSize + 1 < length).concat(length - blockSize - 1);
    const written = offsets.map((_, k) => knownTokens(blockSize + 1, k + 1));
    offsets.forEach((o, k) => writeAt(path, 2 * o, written[k]));

    const got = await mappedBatches({ kind: "file", path, offsets, blockSize, randomBatches: 64 });
    assert.deepStrictEqual(got.x, written.map((w) => [...w.subarray(0, blockSize)]));
    assert.deepStrictEqual(got.y, written.map((w) => [...w.subarray(1)]));
    console.log(
      `${(size / 1e9).toFixed(1)} GB file, ${offsets.length} windows and 64 random batches of ` +
        `8 x ${blockSize}: RSS ${(got.rss / MiB).toFixed(0)} MiB, peak ${
          (got.peak / MiB).toFixed(0)
        } MiB`,
    );
    assert.ok(got.peak < RSS_LIMIT, `peak RSS ${got.peak / MiB} MiB, over ${RSS_LIMIT / MiB} MiB`);
  }),
);

Deno.test(
  "DistributedDataLoader serves the first, middle and last ranks of a sparse 4.3 GB shard within 300 MiB RSS",
  withTempDir(async (dir) => {
    // The largest shard whose last rank's batch ends on the last token: count = world * T + 1
    // (B = 1), under the header's int32 count.
    const [blockSize, world] = [1024, 2 ** 21 - 1];
    const count = world * blockSize + 1;
    const path = join(dir, "fineweb_train_000000.bin");
    sparseFile(path, 1024 + 2 * count);
    const header = new Int32Array(256);
    header.set([20240520, 1, count]);
    writeAt(path, 0, new Uint16Array(header.buffer));
    const ranks = [0, 2 ** 20 + 7, world - 1];
    const written = ranks.map((_, k) => knownTokens(blockSize + 1, k + 11));
    ranks.forEach((r, k) => writeAt(path, 1024 + 2 * r * blockSize, written[k]));

    const pattern = `${dir}/fineweb_train_*.bin`;
    const got = await mappedBatches({ kind: "shard", pattern, ranks, blockSize, world });
    assert.deepStrictEqual(got.x, written.map((w) => [...w.subarray(0, blockSize)]));
    assert.deepStrictEqual(got.y, written.map((w) => [...w.subarray(1)]));
    assert.ok(got.peak < RSS_LIMIT, `peak RSS ${got.peak / MiB} MiB, over ${RSS_LIMIT / MiB} MiB`);
  }),
);
