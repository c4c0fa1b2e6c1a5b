// Run by availability_test.ts in a process without a GPU (DTRAIN_CUDA_LIB names the real library
// on a machine without a driver, or no library at all): CUDA says why it is unavailable, and
// everything that would need it fails with that reason instead of crashing. Not a *_test.ts file:
// it means something only in such a process.
import assert from "node:assert/strict";
import { cuda, nn, tensor } from "../../../mod.ts";
import { DistError } from "../../../src/distributed/errors.ts";
import {
  allReduce,
  destroyProcessGroup,
  initProcessGroup,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import { DataLoader, type Dataset } from "../../../src/data/mod.ts";
import { pinnedBytes } from "../../../src/tensor/device/cuda_pinned.ts";
import type { Tensor } from "../../../mod.ts";
import { freePort } from "../../_harness/ranks.ts";
import { claimingGpu, hasGpu, noGpuReason } from "../../_harness/devices.ts";

if (hasGpu) throw new Error("no_gpu_checks.ts runs only in a process without a GPU");

Deno.test({
  name: "cuda.isAvailable() is false with a reason naming what is missing",
}, () => {
  assert.equal(cuda.isAvailable(), false);
  assert.equal(cuda.deviceCount(), 0);
  // The library is built where nvcc is; the reason then names the driver or the device.
  assert.match(
    noGpuReason,
    /no CUDA library|no usable NVIDIA driver|no CUDA device|CUDA is unusable/,
  );
  assert.equal(cuda.unavailableReason(), noGpuReason, "the probe runs once");
});

Deno.test({
  name: "moving a tensor or a model to cuda throws the reason",
}, () => {
  const expected = `device "cuda:0" is not available: ${noGpuReason}`;
  assert.throws(() => tensor([1, 2]).to("cuda"), { message: expected });
  assert.throws(() => tensor([1, 2], [2], { device: "cuda:0" }), { message: expected });
  assert.throws(() => new nn.Linear(2, 3).to("cuda"), { message: expected });
  assert.throws(() => cuda.synchronize(), {
    message: `cuda.synchronize: CUDA is not available: ${noGpuReason}`,
  });
  assert.throws(() => cuda.setMatmulPrecision("medium"), /is not available/);
});

Deno.test({
  name: 'initProcessGroup({ backend: "nccl" }) rejects with the reason; "auto" falls back to Gloo',
}, async () => {
  const init = (backend: "nccl" | "auto") =>
    initProcessGroup({
      backend,
      initMethod: `tcp://127.0.0.1:${freePort()}`,
      rank: 0,
      worldSize: 1,
      timeoutMs: 10_000,
    });
  await assert.rejects(init("nccl"), (err: unknown) => {
    assert.ok(err instanceof DistError);
    assert.equal(err.code, "invalid");
    assert.ok(err.message.includes(noGpuReason), err.message);
    return true;
  });
  await destroyProcessGroup();
  await init("auto");
  try {
    assert.equal(worldGroup().backendName, "auto");
    const x = tensor([1, 2, 3]);
    await allReduce(x, "sum");
    assert.deepEqual(Array.from(x.toArray()), [1, 2, 3]);
    // A buffer claiming GPU memory goes nowhere without CUDA: refused with the reason.
    const onGpu = claimingGpu(x);
    await assert.rejects(
      async () => await allReduce(onGpu),
      new RegExp(`a tensor is on a GPU but CUDA is not available`),
    );
  } finally {
    await destroyProcessGroup();
  }
});

/** Sample i is [x = [i, i / 2, -i] f32, y = i i32], made per call. */
function perSample(n: number): Dataset<[Tensor, Tensor]> {
  return {
    length: n,
    get: (i) => [tensor([i, i / 2, -i]), tensor([i], [], { dtype: "i32" })],
  };
}

Deno.test({
  name: "DataLoader: pinMemory without CUDA throws, naming the option and the reason",
}, () => {
  const data = perSample(4);
  const expected = `DataLoader: pinMemory needs CUDA, which is not available: ${noGpuReason} ` +
    "(leave pinMemory off, or pass pinMemory: cuda.isAvailable())";
  assert.throws(() => new DataLoader(data, { pinMemory: true }), { message: expected });
  assert.throws(() => new DataLoader(data, { pinMemory: true, device: "cuda:1" }), {
    message: expected,
  });
  // A GPU device without pinMemory fails as moving any tensor there does.
  assert.throws(() => new DataLoader(data, { device: "cuda" }), {
    message: `device "cuda:0" is not available: ${noGpuReason}`,
  });
  assert.equal(pinnedBytes(), 0);
});
