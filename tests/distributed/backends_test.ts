// The backend table (src/distributed/backends.ts): that each row says what its communicator has, and that
// a group refuses, naming the operation and the backend, what its backend cannot reach or do.
import assert from "node:assert/strict";
import {
  type BackendKind,
  BACKENDS,
  type Capability,
  entryOf,
  REQUESTS,
} from "../../src/distributed/backends.ts";
import { BaseBackend } from "../../src/distributed/base_backend.ts";
import { GlooBackend } from "../../src/distributed/gloo.ts";
import { EmuBackend } from "../../src/distributed/emu.ts";
import { destroyProcessGroup, DistError, initProcessGroup } from "../../src/distributed/mod.ts";
import { NcclBackend } from "../../src/distributed/nccl.ts";
import { ShmBackend } from "../../src/distributed/shm.ts";
import { StoreServer } from "../../src/distributed/store/server.ts";
import { HierarchicalBackend } from "../../src/distributed/shm_hierarchical.ts";
import { tensor } from "../../src/tensor/creation.ts";
import { freePort } from "../_harness/ranks.ts";
import { tensorOf } from "../_harness/worker.ts";

/** The method each capability is, on the communicator's class. */
const METHODS: Record<Capability, string> = {
  allReduceBlocking: "allReduceBlocking",
  allGatherBlocking: "allGatherBlocking",
  allGatherStart: "allGatherStart",
  reduceScatter: "reduceScatter",
  reduceScatterBlocking: "reduceScatterBlocking",
  sendRecv: "postP2P",
  allocShared: "allocShared",
};

const CLASSES: Record<Exclude<BackendKind, "auto">, { prototype: object }> = {
  gloo: GlooBackend,
  shm: ShmBackend,
  "shm+gloo": HierarchicalBackend,
  nccl: NcclBackend,
  emu: EmuBackend,
};

Deno.test("every row's capabilities are exactly the methods its communicator overrides", () => {
  const base = BaseBackend.prototype as unknown as Record<string, unknown>;
  for (const [name, cls] of Object.entries(CLASSES)) {
    const { capabilities } = entryOf(name);
    for (const [capability, method] of Object.entries(METHODS)) {
      const own = (cls.prototype as Record<string, unknown>)[method];
      const has = typeof own === "function" && own !== base[method];
      assert.equal(
        capabilities[capability as Capability],
        has,
        `${name}: the table says ${capability} is ${!has}, the class says ${has}`,
      );
    }
  }
});

Deno.test("a method a backend lacks throws the error its row gives, naming the call and the backend", async () => {
  const store = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "t" });
  const gloo = await GlooBackend.connect({
    rank: 0,
    size: 1,
    globalRanks: [0],
    storeHost: "127.0.0.1",
    storePort: store.port,
    token: "t",
    prefix: "lacks/",
    host: "127.0.0.1",
    iface: "",
    timeoutMs: 5000,
  });
  try {
    await assert.rejects(
      gloo.allocShared(1, "f32"),
      (e: DistError) =>
        e instanceof DistError && e.code === "invalid" &&
        e.message === "allocShared: the gloo backend has no shared memory",
    );
  } finally {
    gloo.close();
    await store.close();
  }
});

Deno.test("the rows say which communicators keep their own issue queue (shared memory's unless DTRAIN_SHM_QUEUE=0)", () => {
  const queued = () =>
    (Object.keys(BACKENDS) as BackendKind[]).filter((name) => BACKENDS[name].queued);
  assert.deepEqual(queued(), ["shm", "emu"]);
  const before = Deno.env.get("DTRAIN_SHM_QUEUE");
  Deno.env.set("DTRAIN_SHM_QUEUE", "0");
  try {
    assert.deepEqual(queued(), []);
  } finally {
    if (before === undefined) Deno.env.delete("DTRAIN_SHM_QUEUE");
    else Deno.env.set("DTRAIN_SHM_QUEUE", before);
  }
});

Deno.test("every backend initProcessGroup accepts resolves to rows of the table", () => {
  assert.deepEqual(Object.keys(REQUESTS), ["gloo", "nccl", "emu", "auto"]);
  for (const names of Object.values(REQUESTS)) {
    for (const name of names) assert.ok(name in BACKENDS, name);
  }
  // Memory is "host" or a device family's: each family needs a communicator of its own.
  assert.deepEqual(BACKENDS.gloo.reaches, ["host"]);
  assert.deepEqual(BACKENDS.nccl.reaches, ["cuda"]);
  assert.deepEqual(BACKENDS.emu.reaches, ["emu"]);
  assert.deepEqual(BACKENDS.auto.reaches, ["host", "cuda", "emu"]);
  assert.throws(() => entryOf("mpi"), /backend "mpi" has no row in src\/distributed\/backends.ts/);
  assert.throws(() => entryOf("toString"), /backend "toString" has no row/);
});

Deno.test("a gloo group names the operation and the backend for what Gloo lacks or cannot reach", async () => {
  const group = await initProcessGroup({
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 5000,
  });
  const invalid = (message: string) => (e: unknown) =>
    e instanceof DistError && e.code === "invalid" && e.message === message;
  try {
    assert.equal(group.backendName, "gloo");
    assert.equal(group.canAllReduceBlocking, false);
    assert.equal(group.canStartAllGather, true);
    const x = tensorOf(new Float32Array([1, 2]));
    // Gloo has no issue queue of its own: a blocking call behind one in flight is refused.
    const pending = group.allReduce(x);
    assert.throws(
      () => group.allReduceBlocking(x),
      invalid("allReduceBlocking: 1 collective(s) still in flight; await them first"),
    );
    await pending;
    group.allReduceBlocking(x, "max");
    assert.deepEqual(Array.from(x.data), [1, 2]);
    assert.equal(await group.allocShared(4, "f32"), null);
    // A device this process cannot open holds no host memory: refused before any pointer is read.
    const elsewhere = { ...x, dtype: "f32", isContiguous: () => true, device: "cuda:7" };
    assert.throws(
      () => group.allReduce(elsewhere),
      invalid(
        'allReduce: a tensor is on cuda:7, which the gloo backend cannot reach; move it, or use the "auto" backend',
      ),
    );
    assert.throws(
      () => group.allGather(tensorOf(new Float32Array(2)), elsewhere),
      invalid("allGather: tensors on cuda:7 and in host memory in one call; move them to one"),
    );
  } finally {
    await destroyProcessGroup();
  }
});

Deno.test('a one-rank "emu" group reaches its device only; "auto" reaches host and emu memory', async () => {
  const invalid = (pattern: RegExp) => (e: unknown) =>
    e instanceof DistError && e.code === "invalid" && pattern.test(e.message);
  for (const backend of ["emu", "auto"] as const) {
    const group = await initProcessGroup({
      backend,
      initMethod: `tcp://127.0.0.1:${freePort()}`,
      rank: 0,
      worldSize: 1,
      timeoutMs: 5000,
    });
    try {
      assert.equal(group.backendName, backend);
      const x = tensor([1, 2], [2], { device: "emu:0" });
      await group.allReduce(x, "max");
      assert.deepEqual(Array.from(x.toArray()), [1, 2]);
      assert.equal(group.reaches("emu:0"), true);
      assert.equal(group.reaches("emu:1"), false, "another device than the rank's");
      assert.equal(group.reaches("cpu"), backend === "auto");
      const host = tensorOf(new Float32Array([1, 2]));
      if (backend === "emu") {
        assert.throws(
          () => group.allReduce(host),
          invalid(/^allReduce: a tensor is on cpu, which the emu backend cannot reach; /),
        );
      }
      assert.throws(
        () =>
          group.allGather(tensor([0, 0], [2], { device: "emu:0" }), { ...host, device: "cuda:0" }),
        invalid(/^allGather: tensors on emu:0 and on cuda:0 in one call; move them to one device$/),
      );
    } finally {
      await destroyProcessGroup();
    }
  }
});
