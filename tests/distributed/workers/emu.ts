/**
 * Worker for emu_test.ts: collectives on the emulated accelerator, each rank on `emu:<rank>`,
 * over `initProcessGroup({ backend: BACKEND })` ("emu" or "auto"). MODE picks the scenario:
 * - "collectives": every collective against the host computation, one issued right after the
 *   kernels that make its input, and the calls a group must refuse (reported as messages);
 * - "ddp": DDP create and steps with `findUnusedParameters` on the group;
 * - "apart": an all-reduce of an emu tensor (run with the ranks on two hosts, DTRAIN_SHM_HOST);
 * - "skip": rank 1 skips the all-reduce the others call (and stays until they gave up);
 * - "loop": all-reduce forever, printing "looping" once warmed up, until something fails.
 * @module
 */

import {
  allGather,
  allReduce,
  broadcast,
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
  newGroup,
  reduceScatter,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import type { BackendName } from "../../../src/distributed/backend.ts";
import { Linear } from "../../../src/nn/layers.ts";
import { Module } from "../../../src/nn/module.ts";
import { DistributedDataParallel } from "../../../src/parallel/mod.ts";
import { full, tensor, zeros } from "../../../src/tensor/creation.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { tidyAsync } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";

const mode = Deno.env.get("MODE");
const backend = (Deno.env.get("BACKEND") ?? "emu") as BackendName;
const timeoutMs = envInt("TEST_TIMEOUT_MS", 10_000);

/** The values of `t`, as numbers. */
const values = (t: Tensor) => Array.from(t.toArray() as Float32Array | Int32Array);

/** The message of what `call` throws or rejects with, or "ok". */
async function errorOf(call: () => unknown): Promise<string> {
  try {
    await call();
    return "ok";
  } catch (err) {
    return (err as Error).message;
  }
}

async function collectives(rank: number, size: number, device: string) {
  const n = 5;
  /** Rank r's input: element i is (r + 1) * (i + 1) - 3, as a host computation would take it. */
  const input = (r: number) => Array.from({ length: n }, (_, i) => (r + 1) * (i + 1) - 3);
  const onDevice = (data: number[] | Int32Array) =>
    tensor(data instanceof Int32Array ? data : Float32Array.from(data), [data.length], { device });
  const out: Record<string, unknown> = { backend: worldGroup().backendName };
  for (const op of ["sum", "avg", "max"] as const) {
    const x = onDevice(input(rank));
    await allReduce(x, op);
    out[op] = values(x);
  }
  const i32 = onDevice(Int32Array.from(input(rank)));
  await allReduce(i32, "sum");
  out.i32 = values(i32);
  const b = onDevice(input(rank));
  await broadcast(b, 1);
  out.broadcast = values(b);
  const gathered = zeros([size * n], { device });
  await allGather(gathered, onDevice(input(rank)));
  out.allGather = values(gathered);
  const perRank = Array.from({ length: size }, () => zeros([n], { device }));
  await allGather(perRank, onDevice(input(rank)));
  out.allGatherList = perRank.map(values);
  const blocking = zeros([size * n], { device });
  worldGroup().allGatherBlocking(blocking, onDevice(input(rank)));
  out.allGatherBlocking = values(blocking);
  const started = zeros([size * n], { device });
  worldGroup().allGatherStart(started, onDevice(input(rank))).waitBlocking();
  out.allGatherStart = values(started);
  const chunks = onDevice(Array.from({ length: size * n }, (_, i) => (rank + 1) * i));
  const mine = zeros([n], { device });
  await reduceScatter(mine, chunks, "sum");
  out.reduceScatter = values(mine);
  const blockingSum = onDevice(input(rank));
  worldGroup().allReduceBlocking(blockingSum, "sum");
  out.allReduceBlocking = values(blockingSum);
  // Ordering with the queue: the kernels making the input are queued, not run, when the
  // collective is issued; it must see what they write.
  let made = full([n], rank + 1, { device });
  for (let k = 0; k < 4; k++) made = made.mul(2).add(1);
  const ordered = allReduce(made, "sum");
  out.ordered = values((await ordered, made));
  // What the group must refuse, before any pointer is read.
  const host = tensor(Float32Array.from(input(rank)));
  out.hostTensor = await errorOf(() => allReduce(host, "sum"));
  out.hostAndEmu = await errorOf(() => allGather(zeros([size * n], { device }), host));
  const onGpu = { dtype: "f32", numel: n, isContiguous: () => true, ptr: host.ptr };
  out.cudaAndEmu = await errorOf(() =>
    allGather(zeros([size * n], { device }), { ...onGpu, device: "cuda:0" })
  );
  out.cuda = await errorOf(() => allReduce({ ...onGpu, device: `cuda:${rank}` }));
  const other = `emu:${(rank + 1) % size}`;
  out.otherDevice = await errorOf(() => allReduce(zeros([n], { device: other })));
  out.reaches = ["cpu", device, other].map((d) => worldGroup().reaches(d));
  // A subgroup has a communicator (and segment) of its own, met under its own store prefix.
  const sub = await newGroup([0, 1]);
  const s = onDevice(input(rank));
  await allReduce(s, "sum", sub);
  out.subgroup = [sub.backendName, values(s)];
  return out;
}

/** Two heads; `gated` takes part only where `useGated` says. */
class Gated extends Module {
  used = new Linear(3, 2);
  gated = new Linear(3, 2);
  useGated = true;

  forward(x: Tensor): Tensor {
    const out = this.used.forward(x);
    return this.useGated ? out.add(this.gated.forward(x)) : out;
  }
}

/** The gradients of `model`'s parameters by name (absent: null). */
function grads(model: Module): Record<string, number[]> {
  const result: Record<string, number[]> = {};
  for (const [name, p] of model.namedParameters()) if (p.grad) result[name] = values(p.grad);
  return result;
}

async function ddp(rank: number, device: string) {
  manualSeed(7);
  const model = new Gated().to(device);
  const ddpModel = await DistributedDataParallel.create(model, { findUnusedParameters: true });
  manualSeed(7);
  const local = new Gated();
  const steps = [];
  // Step 0: gated used on rank 0 only; step 1: nowhere (its gradient stays null).
  for (const useGated of [rank === 0, false]) {
    model.useGated = local.useGated = useGated;
    const xs = Float32Array.from({ length: 6 }, (_, i) => (rank + 1) * (i - 2) / 4);
    const loss = (m: Module, where: string) => {
      const y = m.forward(tensor(xs, [2, 3], { device: where }));
      return y.mul(y).sum();
    };
    await tidyAsync(async () => {
      await ddpModel.backward(loss(model, device));
      loss(local, "cpu").backward();
    });
    steps.push({
      grads: grads(model),
      local: grads(local),
      devices: model.parameters().map((p) => p.device),
    });
    model.zeroGrad();
    local.zeroGrad();
  }
  return { backend: worldGroup().backendName, steps };
}

await runWorker(async () => {
  await initProcessGroup({ backend, timeoutMs });
  const rank = getRank();
  const device = `emu:${rank}`;
  try {
    if (mode === "collectives") return await collectives(rank, getWorldSize(), device);
    if (mode === "ddp") return await ddp(rank, device);
    if (mode === "apart") {
      const x = full([4], 1, { device });
      return { backend: worldGroup().backendName, emu: await errorOf(() => allReduce(x)) };
    }
    if (mode === "skip") {
      // Rank 1 stays connected past the others' timeout, so that they see it hung, not dead.
      if (rank === 1) await new Promise((r) => setTimeout(r, timeoutMs + 2000));
      else await allReduce(full([4], 1, { device }));
      return {};
    }
    if (mode === "loop") {
      const x = full([16 * 1024], 1, { device });
      for (let i = 0;; i++) {
        await allReduce(x);
        if (i === 20) console.log("looping");
      }
    }
    throw new Error(`unknown MODE ${mode}`);
  } finally {
    await destroyProcessGroup();
  }
});
