// llm.c's shards and DistributedDataLoader: real shard files in a temp dir, each rank's batches
// checked against positions B*T*rank + k*B*T*numProcesses of the tokens written, shard
// advance and wrap, reset, and the header errors naming the file.
import assert from "node:assert/strict";
import { data } from "../../mod.ts";

/** Writes an llm.c shard (data_common.py's write_datafile) holding `tokens`; header overrides. */
function writeShard(
  path: string,
  tokens: number[],
  header: { magic?: number; version?: number; count?: number } = {},
): void {
  const head = new Int32Array(256);
  head.set([header.magic ?? 20240520, header.version ?? 1, header.count ?? tokens.length]);
  const bytes = new Uint8Array(1024 + 2 * tokens.length);
  bytes.set(new Uint8Array(head.buffer));
  const view = new DataView(bytes.buffer);
  tokens.forEach((v, i) => view.setUint16(1024 + 2 * i, v, true));
  Deno.writeFileSync(path, bytes);
}

/** Tokens whose values say where they are: shard s, index i is s * 1000 + i. */
const shardTokens = (s: number, n: number) => Array.from({ length: n }, (_, i) => s * 1000 + i);

function withDir(fn: (dir: string) => void): () => void {
  return () => {
    const dir = Deno.makeTempDirSync({ prefix: "dtrain_shards_" });
    try {
      fn(dir);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  };
}

/** What llm.c's loader gives `rank`: batches of every shard in order, then the first again. */
function expected(
  counts: number[],
  b: number,
  t: number,
  rank: number,
  world: number,
  steps: number,
) {
  const out: number[][] = [];
  let shard = 0, k = 0;
  while (out.length < steps) {
    if (k >= Math.floor((counts[shard] - 1) / (b * t * world))) {
      [shard, k] = [(shard + 1) % counts.length, 0];
    }
    const start = b * t * rank + k * b * t * world;
    out.push(shardTokens(shard, counts[shard]).slice(start, start + b * t + 1));
    k++;
  }
  return out;
}

Deno.test(
  "DistributedDataLoader serves each rank its llm.c positions across sorted shards, then wraps",
  withDir((dir) => {
    const counts = [61, 45, 100];
    // Written out of order: the pattern's matches are sorted.
    for (const s of [2, 0, 1]) {
      writeShard(`${dir}/tiny_train_00000${s}.bin`, shardTokens(s, counts[s]));
    }
    writeShard(`${dir}/tiny_val_000000.bin`, shardTokens(9, 50));
    const [b, t, world] = [2, 3, 3];
    for (let rank = 0; rank < world; rank++) {
      using loader = new data.DistributedDataLoader(`${dir}/tiny_train_*.bin`, b, t, rank, world);
      assert.deepStrictEqual(loader.files, [0, 1, 2].map((s) => `${dir}/tiny_train_00000${s}.bin`));
      assert.equal(loader.numTokens, 206);
      const want = expected(counts, b, t, rank, world, 12);
      for (const [step, buf] of want.entries()) {
        const [x, y] = loader.nextBatch();
        assert.equal(x.dtype, "i32");
        assert.deepStrictEqual(x.shape, [b, t]);
        assert.deepStrictEqual(
          Array.from(x.toArray()),
          buf.slice(0, -1),
          `rank ${rank} step ${step} x`,
        );
        assert.deepStrictEqual(
          Array.from(y.toArray()),
          buf.slice(1),
          `rank ${rank} step ${step} y`,
        );
      }
    }
  }),
);

Deno.test(
  "shard 0 of 61 tokens at B=2, T=3, 3 ranks: 3 batches, rank 2's last ends at token 60",
  withDir((dir) => {
    writeShard(`${dir}/a.bin`, shardTokens(0, 61));
    writeShard(`${dir}/b.bin`, shardTokens(1, 19));
    using loader = new data.DistributedDataLoader([`${dir}/b.bin`, `${dir}/a.bin`], 2, 3, 2, 3);
    const firsts = [0, 1, 2, 3].map(() => loader.nextBatch()[1].toArray().at(-1));
    assert.deepStrictEqual(firsts, [18, 36, 54, 1018]);
    assert.equal(loader.currentShard, 1);
    loader.reset();
    assert.equal(loader.currentShard, 0);
    assert.deepStrictEqual(Array.from(loader.nextBatch()[0].toArray()), [12, 13, 14, 15, 16, 17]);
  }),
);

Deno.test(
  "a bad magic, version or count names the shard and what is wrong",
  withDir((dir) => {
    const make = (name: string, header: Parameters<typeof writeShard>[2], n = 40) => {
      writeShard(`${dir}/${name}`, shardTokens(0, n), header);
      return `${dir}/${name}`;
    };
    const bad = (path: string, message: RegExp) =>
      assert.throws(() => new data.DistributedDataLoader(path, 1, 4), (e: Error) => {
        assert.ok(e.message.startsWith(path), `${e.message} does not start with ${path}`);
        assert.match(e.message, message);
        return true;
      });
    bad(make("magic.bin", { magic: 20240801 }), /bad magic 20240801, expected 20240520/);
    bad(make("version.bin", { version: 7 }), /unsupported version 7, expected 1/);
    bad(
      make("count.bin", { count: 41 }),
      /the header counts 41 tokens, which need 1106 bytes, but the file has 1104/,
    );
    Deno.writeFileSync(`${dir}/stub.bin`, new Uint8Array(100));
    bad(`${dir}/stub.bin`, /100 bytes, shorter than the 1024-byte header/);
    bad(
      make("small.bin", {}, 4),
      /4 tokens, fewer than one batch of every rank needs \(numProcesses \* B \* T \+ 1 = 5\)/,
    );
    bad(`${dir}/absent.bin`, /cannot read it \(no such file\)/);
  }),
);

Deno.test(
  "DistributedDataLoader refuses an empty pattern and bad sizes or ranks",
  withDir((dir) => {
    writeShard(`${dir}/ok.bin`, shardTokens(0, 40));
    assert.throws(
      () => new data.DistributedDataLoader(`${dir}/none_*.bin`, 1, 4),
      /DistributedDataLoader: no files match .*none_\*\.bin/,
    );
    assert.throws(
      () => new data.DistributedDataLoader(`${dir}/*/x.bin`, 1, 4),
      /wildcards are supported in file names only/,
    );
    assert.throws(
      () => new data.DistributedDataLoader(`${dir}/ok.bin`, 0, 4),
      /batchSize must be a positive integer, got 0/,
    );
    assert.throws(
      () => new data.DistributedDataLoader(`${dir}/ok.bin`, 1, 4, 2, 2),
      /processRank 2 is not in \[0, 2\)/,
    );
  }),
);

Deno.test(
  "a shard counting 0 tokens says so, and a shard path that is a directory or FIFO is named",
  withDir((dir) => {
    const refused = (files: string | string[], message: RegExp) =>
      assert.throws(() => new data.DistributedDataLoader(files, 1, 4), (e: Error) => {
        assert.match(e.message, message);
        return true;
      });
    // Was "counts 0 tokens, which need 1024 bytes, but the file has 1024".
    writeShard(`${dir}/empty.bin`, []);
    refused(
      `${dir}/empty.bin`,
      /empty\.bin: the header counts 0 tokens; a shard holds at least one/,
    );
    writeShard(`${dir}/negative.bin`, [], { count: -3 });
    refused(`${dir}/negative.bin`, /negative\.bin: the header counts -3 tokens; a shard holds/);
    // Was "IsADirectory: Is a directory (os error 21)", naming no path.
    Deno.mkdirSync(`${dir}/train_000.bin`);
    refused([`${dir}/train_000.bin`], /train_000\.bin: is a directory, expected a file of tokens$/);
    // Opened for reading, a FIFO would wait for a writer forever.
    const fifo = new Deno.Command("mkfifo", { args: [`${dir}/fifo.bin`] }).outputSync();
    assert.ok(fifo.success);
    refused([`${dir}/fifo.bin`], /fifo\.bin: is a FIFO, expected a file of tokens$/);
  }),
);
