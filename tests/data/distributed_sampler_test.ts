import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { destroyProcessGroup, initProcessGroup } from "../../src/distributed/mod.ts";
import { DistributedSampler, type DistributedSamplerOptions } from "../../src/data/mod.ts";

/** Every rank's indices for one epoch. */
function shards(
  length: number,
  options: Omit<DistributedSamplerOptions, "rank"> & { numReplicas: number },
  epoch = 0,
): number[][] {
  return Array.from({ length: options.numReplicas }, (_, rank) => {
    const sampler = new DistributedSampler({ length }, { ...options, rank });
    sampler.setEpoch(epoch);
    return [...sampler];
  });
}

// Worked by hand from torch/utils/data/distributed.py:
//   num_samples = ceil((len - R) / R) if drop_last and len % R != 0 else ceil(len / R)
//   total_size = num_samples * R; pad with indices[:padding] (repeated) or truncate to total_size;
//   rank r takes indices[r:total_size:R].
Deno.test("DistributedSampler splits 10 samples over 3 ranks like PyTorch (no shuffle)", () => {
  // 10 -> ceil(10/3) = 4 each, total 12: padded with indices 0 and 1.
  assert.deepEqual(shards(10, { numReplicas: 3, shuffle: false }), [
    [0, 3, 6, 9],
    [1, 4, 7, 0],
    [2, 5, 8, 1],
  ]);
  // dropLast: 10 % 3 = 1 -> ceil((10 - 3)/3) = 3 each, total 9: index 9 dropped.
  assert.deepEqual(shards(10, { numReplicas: 3, shuffle: false, dropLast: true }), [
    [0, 3, 6],
    [1, 4, 7],
    [2, 5, 8],
  ]);
});

Deno.test("DistributedSampler lengths follow PyTorch's num_samples for hand-worked cases", () => {
  // [length, numReplicas, dropLast, num_samples, total_size]
  const cases: [number, number, boolean, number, number][] = [
    [10, 3, false, 4, 12],
    [10, 3, true, 3, 9],
    [11, 4, false, 3, 12],
    [11, 4, true, 2, 8], // ceil(7/4) = 2
    [12, 4, true, 3, 12], // divisible: ceil(12/4)
    [2, 3, true, 0, 0], // ceil(-1/3) = 0: nothing to read
    [2, 3, false, 1, 3],
    [1, 4, false, 1, 4],
    [0, 2, false, 0, 0],
  ];
  for (const [length, numReplicas, dropLast, numSamples, totalSize] of cases) {
    const sampler = new DistributedSampler({ length }, { numReplicas, rank: 0, dropLast });
    const what = `length ${length}, ${numReplicas} replicas, dropLast ${dropLast}`;
    assert.equal(sampler.length, numSamples, what);
    assert.equal(Object.is(sampler.length, -0), false, what);
    assert.equal(sampler.totalSize, totalSize, what);
    for (const shard of shards(length, { numReplicas, dropLast })) {
      assert.equal(shard.length, numSamples, what);
    }
  }
});

Deno.test("DistributedSampler pads by repeating the whole order when it is shorter than the padding", () => {
  // 1 sample, 4 ranks: padding 3 > 1, so indices * ceil(3/1) -> every rank reads index 0.
  assert.deepEqual(shards(1, { numReplicas: 4, shuffle: false }), [[0], [0], [0], [0]]);
  // 2 samples, 5 ranks: total 5 -> [0, 1, 0, 1, 0].
  assert.deepEqual(shards(2, { numReplicas: 5, shuffle: false }), [[0], [1], [0], [1], [0]]);
});

Deno.test("DistributedSampler covers every index over 1..4 ranks, disjoint apart from padding", () => {
  for (const length of [0, 1, 7, 10, 13, 64]) {
    for (let numReplicas = 1; numReplicas <= 4; numReplicas++) {
      for (const dropLast of [false, true]) {
        const what = `length ${length}, ${numReplicas} replicas, dropLast ${dropLast}`;
        const all = shards(length, { numReplicas, dropLast, seed: 5 }, 2).flat();
        const distinct = new Set(all);
        const total = new DistributedSampler({ length }, { numReplicas, rank: 0, dropLast })
          .totalSize;
        assert.equal(all.length, total, what);
        assert.ok(all.every((i) => Number.isInteger(i) && i >= 0 && i < length), what);
        if (dropLast) {
          // No index twice; only the tail (fewer than numReplicas) is left out.
          assert.equal(distinct.size, total, what);
          assert.ok(length - distinct.size < numReplicas, what);
        } else {
          // Every index read; repeats are only the padding.
          assert.equal(distinct.size, length, what);
          assert.equal(all.length - distinct.size, total - length, what);
        }
      }
    }
  }
});

Deno.test("DistributedSampler shares one order across ranks per seed and epoch", () => {
  const options = { numReplicas: 3, seed: 17 };
  const epoch1 = shards(100, options, 1);
  assert.deepEqual(shards(100, options, 1), epoch1);
  assert.notDeepEqual(shards(100, options, 2), epoch1);
  assert.notDeepEqual(shards(100, { ...options, seed: 18 }, 1), epoch1);
  // Interleaving the ranks rebuilds one permutation of 0..99 (plus 2 padding indices from its start).
  const order = Array.from({ length: 102 }, (_, k) => epoch1[k % 3][Math.floor(k / 3)]);
  assert.deepEqual(
    order.slice(0, 100).sort((a, b) => a - b),
    Array.from({ length: 100 }, (_, i) => i),
  );
  assert.deepEqual(order.slice(100), order.slice(0, 2));
  // seed + epoch is what matters, like PyTorch.
  assert.deepEqual(shards(100, { numReplicas: 3, seed: 16 }, 2), epoch1);
});

Deno.test("DistributedSampler stateDict() restores epoch and seed", () => {
  const sampler = new DistributedSampler({ length: 40 }, { numReplicas: 2, rank: 1, seed: 3 });
  sampler.setEpoch(6);
  const state = sampler.stateDict();
  assert.deepEqual(state, { epoch: 6, seed: 3 });
  const resumed = new DistributedSampler({ length: 40 }, { numReplicas: 2, rank: 1 });
  resumed.loadStateDict(state);
  assert.deepEqual([...resumed], [...sampler]);
  assert.equal(resumed.epoch, 6);
});

Deno.test("DistributedSampler refuses bad ranks, world sizes, epochs and seeds", () => {
  const make = (numReplicas: number, rank: number, seed = 0) => () =>
    new DistributedSampler({ length: 8 }, { numReplicas, rank, seed });
  assert.throws(make(3, 3), /rank 3 is out of range \[0, 3\) for numReplicas 3/);
  assert.throws(make(3, -1), /rank -1 is out of range/);
  assert.throws(make(0, 0), /numReplicas 0 is not a positive integer/);
  assert.throws(make(2, 0.5), /rank 0.5/);
  assert.throws(make(2, 0, -1), /seed -1/);
  assert.throws(() => make(2, 0)().setEpoch(-3), /DistributedSampler: epoch -3/);
});

Deno.test("DistributedSampler without numReplicas and rank needs an initialised process group", () => {
  assert.throws(
    () => new DistributedSampler({ length: 8 }),
    /numReplicas was not given and the process group cannot supply it \(.*initProcessGroup/,
  );
});

Deno.test({
  name: "DistributedSampler takes numReplicas and rank from a 1-rank process group",
  ignore: !existsSync(new URL("../../build/libdtrain_gloo.so", import.meta.url)),
  async fn() {
    await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
    try {
      const sampler = new DistributedSampler({ length: 5 }, { shuffle: false });
      assert.deepEqual([sampler.numReplicas, sampler.rank, [...sampler]], [1, 0, [0, 1, 2, 3, 4]]);
    } finally {
      await destroyProcessGroup();
    }
  },
});

Deno.test("DistributedSampler resumed mid-epoch at another world size draws every sample exactly once", () => {
  for (const [n, before, after, batch, steps] of [[96, 4, 2, 4, 3], [100, 3, 4, 2, 6]]) {
    const shard = (world: number, rank: number) =>
      new DistributedSampler({ length: n }, { numReplicas: world, rank, seed: 5 });
    // `before` ranks train `steps` batches of `batch`: global positions [0, steps * batch * before).
    const consumed = steps * batch * before;
    const seen: number[] = [];
    for (let rank = 0; rank < before; rank++) {
      const s = shard(before, rank);
      s.setEpoch(2);
      seen.push(...s.indices().subarray(0, steps * batch));
    }
    // Restarted with `after` ranks, from the saved state.
    const saved = { epoch: 2, seed: 5, position: consumed };
    for (let rank = 0; rank < after; rank++) {
      const s = shard(after, rank);
      s.loadStateDict(saved);
      assert.equal(s.length, Math.ceil((n - consumed) / after));
      seen.push(...s.indices());
    }
    assert.equal(seen.length, n, `${n} samples, ${before} then ${after} ranks`);
    assert.deepEqual([...seen].sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i));
  }
});

Deno.test("DistributedSampler stateDict() keeps a mid-epoch position; setEpoch() starts over", () => {
  const sampler = new DistributedSampler({ length: 40 }, { numReplicas: 2, rank: 0, seed: 3 });
  sampler.setEpoch(1);
  sampler.startAt(10);
  assert.deepEqual(sampler.stateDict(), { epoch: 1, seed: 3, position: 10 });
  assert.equal(sampler.length, 15);
  sampler.setEpoch(2);
  assert.equal(sampler.position, 0);
  assert.throws(() => sampler.startAt(41), /position 41 is outside the epoch's 40 samples/);
});
