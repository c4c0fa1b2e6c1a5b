// Argument validation and lifecycle of the process-group API, in one single-rank process.
import assert from "node:assert/strict";
import {
  allGather,
  allReduce,
  barrier,
  broadcast,
  destroyProcessGroup,
  DistError,
  getLocalRank,
  getRank,
  getWorldSize,
  initProcessGroup,
  isInitialized,
  newGroup,
  reduceScatter,
} from "../../src/distributed/mod.ts";
import { allocatedBytes } from "../../src/tensor/storage.ts";
import { full } from "../../src/tensor/creation.ts";
import { freePort } from "../_harness/ranks.ts";
import { tensorOf } from "../_harness/worker.ts";

function invalid(message: string | RegExp) {
  return (e: unknown) =>
    e instanceof DistError && e.code === "invalid" &&
    (typeof message === "string" ? e.message === message : message.test(e.message));
}

const f32 = (n: number) => tensorOf(new Float32Array(n));
const i32 = (n: number) => tensorOf(new Int32Array(n));

Deno.test("collectives before initProcessGroup say to call it", () => {
  assert.equal(isInitialized(), false);
  assert.throws(
    () => allReduce(f32(4)),
    invalid("allReduce: the process group is not initialized; call initProcessGroup() first"),
  );
  assert.throws(() => getRank(), invalid(/^getRank: the process group is not initialized/));
});

Deno.test("a single-rank group runs every collective and validates its arguments", async () => {
  const port = freePort();
  const group = await initProcessGroup({
    initMethod: `tcp://127.0.0.1:${port}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 5000,
  });
  try {
    assert.equal(isInitialized(), true);
    assert.deepEqual([getRank(), getWorldSize(), getLocalRank()], [0, 1, 0]);
    assert.equal(group.backendName, "gloo");

    const x = tensorOf(new Float32Array([1, 2, 3]));
    await allReduce(x, "avg");
    assert.deepEqual(Array.from(x.data), [1, 2, 3]);
    await broadcast(x, 0);
    const out = f32(3);
    await allGather(out, x);
    assert.deepEqual(Array.from(out.data), [1, 2, 3]);
    const shard = f32(3);
    await reduceScatter(shard, x, "max");
    assert.deepEqual(Array.from(shard.data), [1, 2, 3]);
    await barrier();
    await allReduce(f32(0));

    const f64 = { dtype: "f64", numel: 4, isContiguous: () => true, ptr: x.ptr };
    assert.throws(
      () => allReduce(f64),
      invalid('allReduce: tensor dtype must be one of f32, i32, bf16, f16, got "f64"'),
    );
    const strided = { ...f32(4), isContiguous: () => false };
    assert.throws(
      () => allReduce(strided),
      invalid("allReduce: tensor must be contiguous; call .contiguous() first"),
    );
    assert.throws(
      () => allReduce(i32(4), "avg"),
      invalid('allReduce: op "avg" needs floating-point tensors (f32, bf16, f16), got i32'),
    );
    assert.throws(
      // deno-lint-ignore no-explicit-any
      () => allReduce(f32(4), "mean" as any),
      invalid('allReduce: unknown reduce op "mean"; use one of sum, avg, min, max, prod'),
    );
    assert.throws(
      () => broadcast(f32(4), 1),
      invalid("broadcast: src 1 is not a rank of this group (ranks 0)"),
    );
    assert.throws(
      () => reduceScatter(f32(3), f32(4)),
      invalid("reduceScatter: input has 4 elements, expected 3 (output length 3 × group size 1)"),
    );
    assert.throws(
      () => reduceScatter(f32(3), i32(3)),
      invalid("reduceScatter: input is i32 but the other tensor is f32"),
    );
    assert.throws(
      () => allGather([f32(3), f32(3)], f32(3)),
      invalid("allGather: got 2 outputs for a group of 1 ranks"),
    );
    assert.throws(
      () => allGather([f32(2)], f32(3)),
      invalid("allGather: output 0 has 2 elements, expected 3 (the input's length)"),
    );
    // The real Tensor has numel() as a method: accepted as well.
    const methodNumel = { ...f32(2), numel: () => 2 };
    await allReduce(methodNumel);

    await assert.rejects(newGroup([0, 0]), invalid("newGroup: rank 0 is listed twice"));
    await assert.rejects(newGroup([1]), invalid("newGroup: rank 1 is outside world size 1"));
    const sub = await newGroup([0]);
    await allReduce(x, "sum", sub);
    // PyTorch-style keywords from JavaScript: the group is positional.
    assert.throws(
      () => allReduce(x, "sum", { group: sub } as never),
      invalid(
        "allReduce: group must be a ProcessGroup (from newGroup, or a DeviceMesh's getGroup()), " +
          "got Object; it is a positional argument, as in allReduce(t, ..., group)",
      ),
    );
    assert.throws(() => barrier(null as never), invalid(/^barrier: group must be .*got null;/));

    await assert.rejects(
      initProcessGroup({ initMethod: `tcp://127.0.0.1:${port}`, rank: 0, worldSize: 1 }),
      invalid("initProcessGroup: already initialized in this process"),
    );
  } finally {
    await destroyProcessGroup();
  }
  assert.equal(isInitialized(), false);
  assert.throws(() => group.allReduce(f32(1)), invalid("allReduce: process group was destroyed"));
  assert.throws(
    () => allReduce(f32(1)),
    invalid(/^allReduce: the process group is not initialized/),
  );
  await destroyProcessGroup(); // idempotent
});

Deno.test("a tensor disposed while its collective is queued keeps its memory until the collective ends", async () => {
  await initProcessGroup({
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 5000,
  });
  try {
    const before = allocatedBytes();
    const g = full([1024], 2);
    const outs = [full([1024], 0)];
    const w0 = barrier();
    const w = allReduce(g, "avg");
    const gathered = allGather(outs, g);
    g.dispose();
    outs[0].dispose();
    assert.notEqual(g.storage.ptr, null, "the queued all-reduce still holds the storage");
    assert.notEqual(outs[0].storage.ptr, null, "the queued all-gather still holds its output");
    await Promise.all([w0, w, gathered]);
    assert.equal(g.storage.ptr, null, "released once the collectives ended");
    assert.equal(outs[0].storage.ptr, null);
    assert.equal(allocatedBytes(), before);
  } finally {
    await destroyProcessGroup();
  }
});

Deno.test("initProcessGroup on a busy MASTER_PORT names the address", async () => {
  const port = freePort();
  using _busy = Deno.listen({ hostname: "127.0.0.1", port });
  await assert.rejects(
    initProcessGroup({ initMethod: `tcp://127.0.0.1:${port}`, rank: 0, worldSize: 2, token: "t" }),
    (e) =>
      e instanceof DistError && e.code === "store" &&
      e.message.startsWith(`cannot host the store on 127.0.0.1:${port}: address already in use`),
  );
  assert.equal(isInitialized(), false);
});
