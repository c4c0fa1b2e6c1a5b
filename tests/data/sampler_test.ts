import assert from "node:assert/strict";
import { RandomSampler, SequentialSampler } from "../../src/data/mod.ts";
import { permutation, SplitMix64 } from "../../src/data/_random.ts";

/** splitmix64 written with BigInt, as published (Vigna's splitmix64.c). */
function* referenceSplitMix64(seed: bigint): Generator<bigint> {
  const mask = (1n << 64n) - 1n;
  let state = seed;
  for (;;) {
    state = (state + 0x9e3779b97f4a7c15n) & mask;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
    yield z ^ (z >> 31n);
  }
}

Deno.test("SplitMix64 in 32-bit halves matches the 64-bit reference for several seeds", () => {
  for (const seed of [0, 1, 42, 0xffffffff, 2 ** 32, 2 ** 53 - 1]) {
    const rng = new SplitMix64(seed), reference = referenceSplitMix64(BigInt(seed));
    for (let i = 0; i < 1000; i++) {
      const [lo, hi] = rng.next();
      assert.equal((BigInt(hi) << 32n) | BigInt(lo), reference.next().value, `seed ${seed} #${i}`);
    }
  }
  // Published first output for seed 0.
  const [lo, hi] = new SplitMix64(0).next();
  assert.equal((BigInt(hi) << 32n) | BigInt(lo), 0xe220a8397b1dcdafn);
});

Deno.test("permutation() shuffles 0..n-1 reproducibly and draws the 6 orders of 3 evenly", () => {
  const p = permutation(1000, 5);
  assert.deepEqual([...p].sort((a, b) => a - b), Array.from({ length: 1000 }, (_, i) => i));
  assert.deepEqual(permutation(1000, 5), p);
  assert.notDeepEqual(permutation(1000, 6), p);
  assert.deepEqual(permutation(0, 1), new Int32Array(0));
  const counts = new Map<string, number>();
  for (let seed = 0; seed < 6000; seed++) {
    const key = permutation(3, seed).join();
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  assert.equal(counts.size, 6);
  for (const [order, n] of counts) assert.ok(Math.abs(n - 1000) < 150, `${order}: ${n}`);
});

Deno.test("SequentialSampler yields 0..n-1 and follows the dataset's length", () => {
  const source = { length: 4 };
  const sampler = new SequentialSampler(source);
  assert.deepEqual([...sampler], [0, 1, 2, 3]);
  source.length = 2;
  assert.deepEqual([sampler.length, [...sampler]], [2, [0, 1]]);
});

Deno.test("RandomSampler: same seed and epoch give the same order, new epochs new orders", () => {
  const a = new RandomSampler({ length: 50 }, { seed: 3 });
  const b = new RandomSampler({ length: 50 }, { seed: 3 });
  a.setEpoch(4);
  b.setEpoch(4);
  const order = [...a];
  assert.deepEqual([...b], order);
  assert.deepEqual([...order].sort((x, y) => x - y), Array.from({ length: 50 }, (_, i) => i));
  a.setEpoch(5);
  assert.notDeepEqual([...a], order);
  // Epoch e draws from seed + e, like PyTorch's samplers.
  const c = new RandomSampler({ length: 50 }, { seed: 7 });
  c.setEpoch(0);
  assert.deepEqual([...c], order);
});

Deno.test("RandomSampler advances the epoch between passes when setEpoch is not called", () => {
  const auto = new RandomSampler({ length: 20 }, { seed: 1 });
  const explicit = new RandomSampler({ length: 20 }, { seed: 1 });
  for (let epoch = 0; epoch < 3; epoch++) {
    explicit.setEpoch(epoch);
    assert.deepEqual([...auto], [...explicit], `epoch ${epoch}`);
  }
});

Deno.test("RandomSampler stateDict() resumes the sequence of orders in a new sampler", () => {
  const sampler = new RandomSampler({ length: 30 }, { seed: 9 });
  assert.deepEqual(sampler.stateDict(), { epoch: 0, seed: 9 });
  [...sampler];
  [...sampler];
  const state = sampler.stateDict();
  assert.deepEqual(state, { epoch: 2, seed: 9 });
  const resumed = new RandomSampler({ length: 30 });
  resumed.loadStateDict(state);
  assert.deepEqual([...resumed], [...sampler]);
  assert.throws(() => resumed.loadStateDict({ epoch: -1, seed: 0 }), /epoch -1/);
  assert.throws(() => resumed.setEpoch(0.5), /RandomSampler: epoch 0.5/);
  assert.throws(() => new RandomSampler({ length: 3 }, { seed: -2 }), /seed -2/);
});
