// fullyShard's states and refusals in a world of one process (the multi-rank behaviour is in
// fsdp_test.ts): what the module's attributes hold, which memory exists, and the errors.
import assert from "node:assert/strict";
import { destroyProcessGroup, initProcessGroup } from "../../src/distributed/mod.ts";
import { MLP, Sequential } from "../../src/nn/container.ts";
import { Linear } from "../../src/nn/layers.ts";
import { Module } from "../../src/nn/module.ts";
import { fsdpStateOf, fullyShard, gradientDivideFactors } from "../../src/parallel/mod.ts";
import { noGrad } from "../../src/tensor/autograd.ts";
import { randn } from "../../src/tensor/creation.ts";
import { manualSeed } from "../../src/tensor/random.ts";
import { tidy, tidyAsync } from "../../src/tensor/scope.ts";
import { allocatedBytes } from "../../src/tensor/storage.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";

async function inWorldOfOne(fn: () => void | Promise<void>): Promise<void> {
  await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
  try {
    await fn();
  } finally {
    await destroyProcessGroup();
  }
}

/** A Linear that remembers the weight its forward saw (the full parameter, under FSDP). */
class Probe extends Linear {
  #seen: Tensor | null = null;
  get seen(): Tensor {
    return this.#seen!;
  }
  override forward(x: Tensor): Tensor {
    this.#seen = this.weight;
    return super.forward(x);
  }
}

for (const reshardAfterForward of [true, false]) {
  Deno.test(`fullyShard with reshardAfterForward ${reshardAfterForward}: the full parameter's memory is ${reshardAfterForward ? "freed" : "kept"} between forward and backward, freed after`, async () => {
    await inWorldOfOne(async () => {
      const probe = new Probe(4, 6);
      fullyShard(probe, { reshardAfterForward });
      const model = fullyShard(new Sequential(probe, new Linear(6, 2)), { reshardAfterForward });
      const shard = probe.weight;
      const loss = model.forward(randn([3, 4])).sum();
      assert.notEqual(probe.seen, shard);
      assert.equal(probe.seen.storage.ptr === null, reshardAfterForward);
      assert.equal(probe.weight === shard, reshardAfterForward);
      await model.backward(loss);
      assert.equal(probe.seen.storage.ptr, null);
      assert.equal(probe.weight, shard);
      assert.deepEqual(shard.grad!.shape, [6, 4]);
      assert.equal(probe.seen.grad, null);
    });
  });
}

Deno.test("a plain loss.backward() through a fully sharded module says to await model.backward", async () => {
  await inWorldOfOne(() => {
    const model = fullyShard(new MLP([4, 6, 2]));
    const loss = model.forward(randn([3, 4])).sum();
    assert.throws(() => loss.backward(), /await model\.backward\(loss\)/);
  });
});

Deno.test("fullyShard refuses a module sharded twice and a mixed-precision policy it does not have, naming the field", async () => {
  await inWorldOfOne(() => {
    const model = fullyShard(new Linear(2, 2));
    assert.throws(() => fullyShard(model), /this Linear is already fully sharded/);
    assert.throws(
      () => fullyShard(new Linear(2, 2), { mpPolicy: { paramDtype: "f64" as "f32" } }),
      /^RangeError: fullyShard: mpPolicy\.paramDtype must be one of f32, bf16, f16, got "f64"$/,
    );
    assert.throws(
      () => fullyShard(new Linear(2, 2), { mpPolicy: { reduceDtype: "i32" as "f32" } }),
      /fullyShard: mpPolicy\.reduceDtype must be one of f32, bf16, f16, got "i32"/,
    );
    assert.throws(
      () => fullyShard(new Linear(2, 2), { mpPolicy: { outputDtype: "bf16" } as never }),
      /fullyShard: mpPolicy\.outputDtype is not a field of the policy/,
    );
    // f32 is a policy like no policy.
    const plain = fullyShard(new Linear(2, 2), { mpPolicy: { paramDtype: "f32" } });
    assert.equal(plain.parameters().length, 2);
  });
});

Deno.test("gradients average as FSDP2's _get_gradient_divide_factors: avg for f32 and bf16, a power of two near the root before an f16 sum", () => {
  assert.deepEqual(gradientDivideFactors(1, "bf16"), { pre: 1, op: "sum", post: 1 });
  assert.deepEqual(gradientDivideFactors(3, "f32"), { pre: 1, op: "avg", post: 1 });
  assert.deepEqual(gradientDivideFactors(3, "bf16"), { pre: 1, op: "avg", post: 1 });
  const f16 = [1, 2, 3, 4, 8, 16, 24].map((n) => gradientDivideFactors(n, "f16"));
  assert.deepEqual(f16.map((f) => [f.pre, f.post]), [
    [1, 1],
    [2, 1],
    [2, 1.5],
    [2, 2],
    [4, 2],
    [4, 4],
    [8, 3],
  ]);
  assert.ok(f16.every((f) => f.op === "sum"));
});

Deno.test("fullyShard with paramDtype bf16 on cpu: bf16 gathers and compute, f32 shards and grads, half the gather bytes", async () => {
  await inWorldOfOne(async () => {
    const run = async (paramDtype: "f32" | "bf16", reduceDtype?: "f32") => {
      manualSeed(3);
      const model = fullyShard(new Linear(4, 3), { mpPolicy: { paramDtype, reduceDtype } });
      const y = model.forward(randn([2, 4]));
      await model.backward(y.sum());
      const dtypes = model.parameters().map((p) => `${p.dtype}/${p.grad?.dtype}`);
      return { out: y.dtype, dtypes, stats: model.lastStats };
    };
    const [full, half, mixed] = [await run("f32"), await run("bf16"), await run("bf16", "f32")];
    assert.equal(half.out, "bf16", "forward computed on bf16 parameters (and a bf16 input)");
    assert.deepEqual(half.dtypes, ["f32/f32", "f32/f32"]);
    assert.equal(half.stats.allGatherBytes * 2, full.stats.allGatherBytes);
    assert.equal(half.stats.reduceScatterBytes * 2, full.stats.reduceScatterBytes);
    assert.equal(mixed.stats.reduceScatterBytes, full.stats.reduceScatterBytes, "f32 reduce");
    // castForwardInputs false: the f32 input meets the bf16 weight, and the product promotes to f32.
    const uncast = fullyShard(new Linear(4, 3), {
      mpPolicy: { paramDtype: "bf16", castForwardInputs: false },
    });
    assert.equal(uncast.forward(randn([2, 4])).dtype, "f32");
  });
});

Deno.test("a group prefetched for a backward that never reaches it is resharded when backward ends", async () => {
  await inWorldOfOne(async () => {
    class TwoHeads extends Module {
      unused = new Linear(4, 3);
      used = new Linear(4, 3);
      forward(x: Tensor): Tensor {
        this.unused.forward(x);
        return this.used.forward(x);
      }
    }
    const net = new TwoHeads();
    fullyShard(net.unused);
    fullyShard(net.used);
    const model = fullyShard(net);
    const shard = net.unused.weight;
    await model.backward(model.forward(randn([2, 4])).sum());
    // Forward gathers unused and used (the root has no parameters of its own); backward gathers
    // used again and prefetches unused, the group before it in forward order.
    assert.equal(model.lastStats.allGathers, 4);
    assert.equal(net.unused.weight, shard);
    assert.deepEqual(Array.from(shard.grad!.toArray()), Array(12).fill(0));
  });
});

/** Two Linears under a root without parameters; `skipSecond` leaves the second out of forward. */
class Pair extends Module {
  first = new Linear(4, 6);
  second = new Linear(6, 2);
  skipSecond = false;
  /** The second group's state each time the first one's forward ran. */
  seen: string[] = [];
  forward(x: Tensor): Tensor {
    const h = this.first.forward(x);
    return this.skipSecond ? h : this.second.forward(h);
  }
}

function shardPair(reshardAfterForward = true, forwardPrefetch?: boolean) {
  const net = new Pair();
  const forward = net.first.forward.bind(net.first);
  net.first.forward = (x: Tensor) => {
    net.seen.push(fsdpStateOf(net.second)!.group!.state);
    return forward(x);
  };
  fullyShard(net.first, { reshardAfterForward });
  fullyShard(net.second, { reshardAfterForward, forwardPrefetch });
  return { net, model: fullyShard(net, { reshardAfterForward }) };
}

for (const reshardAfterForward of [true, false]) {
  Deno.test(`from the second step (reshardAfterForward ${reshardAfterForward}), the next group's all-gather is in flight while the group before it computes, in evaluation forwards too`, async () => {
    await inWorldOfOne(async () => {
      const { net, model } = shardPair(reshardAfterForward);
      const shard = net.second.weight;
      await model.backward(model.forward(randn([3, 4])).sum());
      assert.deepEqual(net.seen, ["sharded"], "the first step knows no order yet");
      assert.equal(model.lastStats.forwardPrefetches, 0);
      await model.backward(model.forward(randn([3, 4])).sum());
      assert.deepEqual(net.seen.slice(1), ["gathering"]);
      // The root (no parameters) started the first group's gather, the first group the second's.
      assert.equal(model.lastStats.forwardPrefetches, 2);
      noGrad(() => model.forward(randn([3, 4])));
      assert.deepEqual(net.seen.slice(2), ["gathering"]);
      assert.equal(net.second.weight, shard, "resharded after the evaluation forward");
    });
  });
}

Deno.test("a prefetched all-gather that the forward does not use is waited for and freed when the root's forward ends", async () => {
  await inWorldOfOne(async () => {
    const { net, model } = shardPair();
    const shard = net.second.weight;
    await model.backward(model.forward(randn([3, 4])).sum());
    net.skipSecond = true;
    const secondGrad = Array.from(net.second.weight.grad!.toArray());
    const before = allocatedBytes();
    await tidyAsync(async () => {
      const loss = model.forward(randn([3, 4])).sum();
      assert.deepEqual(net.seen, ["sharded", "gathering"]);
      assert.equal(fsdpStateOf(net.second)!.group!.state, "sharded");
      assert.equal(net.second.weight, shard);
      await model.backward(loss);
    });
    assert.equal(allocatedBytes(), before, "the gathered parameters were freed");
    assert.equal(model.lastStats.forwardPrefetches, 2);
    const unchanged = Array.from(net.second.weight.grad!.toArray());
    assert.deepEqual(unchanged, secondGrad, "no gradient added for a group that did not run");
  });
});

Deno.test("forwardPrefetch false gathers the module only when its forward starts", async () => {
  await inWorldOfOne(async () => {
    const { net, model } = shardPair(true, false);
    for (let step = 0; step < 2; step++) await model.backward(model.forward(randn([3, 4])).sum());
    assert.deepEqual(net.seen, ["sharded", "sharded"]);
    // The root still starts the first module's gather ahead.
    assert.equal(model.lastStats.forwardPrefetches, 1);
  });
});

Deno.test("keepGathered gathers each group once for an evaluation's forwards, which equal the resharding ones, and reshards after", async () => {
  await inWorldOfOne(async () => {
    manualSeed(3);
    const probe = new Probe(4, 6);
    fullyShard(probe);
    const model = fullyShard(new Sequential(probe, new Linear(6, 2)));
    const shard = probe.weight;
    const xs = [randn([3, 4]), randn([3, 4]), randn([3, 4])];
    const forward = (x: Tensor) => tidy(() => noGrad(() => Array.from(model.forward(x).toArray())));
    const resharding = xs.map(forward);
    const state = fsdpStateOf(model)!;
    const before = allocatedBytes();
    const seen: Tensor[] = [];
    const kept = await state.keepGathered(() =>
      xs.map((x) => {
        const out = forward(x);
        seen.push(probe.seen);
        assert.notEqual(probe.weight, shard, "the full parameter stays between forwards");
        return out;
      })
    );
    assert.deepEqual(kept, resharding);
    assert.ok(seen.every((w) => w === seen[0]), "one gathered parameter served every forward");
    assert.equal(probe.weight, shard, "resharded when the evaluation ends");
    assert.equal(seen[0].storage.ptr, null, "its memory freed");
    assert.equal(allocatedBytes(), before);
    assert.equal(state.keepsGathered, false);
    await assert.rejects(
      fsdpStateOf(probe)!.keepGathered(() => {}),
      /keepGathered\(\) must be called on the root/,
    );
  });
});
