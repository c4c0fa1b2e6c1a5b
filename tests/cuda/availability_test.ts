// On machines without a GPU (CI, development machines): CUDA reports itself unavailable with
// the reason, and everything that would need it fails with that reason instead of crashing.
// Where a GPU is, these tests are ignored (ops_test.ts and ddp_test.ts run instead). A gloo group
// refuses accelerator memory on every machine, and a real device tensor on each accelerator.
import assert from "node:assert/strict";
import { cuda, nn, tensor } from "../../mod.ts";
import { DistError } from "../../src/dist/errors.ts";
import {
  allReduce,
  destroyProcessGroup,
  initProcessGroup,
  worldGroup,
} from "../../src/dist/mod.ts";
import { freePort } from "../_harness/ranks.ts";
import { deviceTest, hasGpu, noGpuReason } from "./_gpu.ts";

const skip = { ignore: hasGpu };

Deno.test({
  name: "cuda.isAvailable() is false with a reason naming what is missing",
  ...skip,
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
  ...skip,
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
  ...skip,
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
    const onGpu = {
      dtype: "f32",
      numel: 1,
      isContiguous: () => true,
      ptr: x.ptr,
      device: "cuda:0",
    };
    await assert.rejects(
      async () => await allReduce(onGpu),
      new RegExp(`a tensor is on a GPU but CUDA is not available`),
    );
  } finally {
    await destroyProcessGroup();
  }
});

Deno.test("a gloo group refuses a tensor in GPU memory instead of reading a device pointer", async () => {
  await initProcessGroup({
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 10_000,
  });
  try {
    const x = tensor([1]);
    const onGpu = {
      dtype: "f32",
      numel: 1,
      isContiguous: () => true,
      ptr: x.ptr,
      device: "cuda:0",
    };
    assert.throws(
      () => allReduce(onGpu),
      {
        message:
          'allReduce: a tensor is on cuda:0, which the gloo backend cannot reach; move it, or use the "auto" backend',
      },
    );
  } finally {
    await destroyProcessGroup();
  }
});

deviceTest("a gloo group refuses a device tensor, naming its device", async (device) => {
  await initProcessGroup({
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 10_000,
  });
  try {
    assert.throws(() => allReduce(tensor([1, 2]).to(device)), {
      message: `allReduce: a tensor is on ${device}, which the gloo backend cannot reach; move ` +
        'it, or use the "auto" backend',
    });
  } finally {
    await destroyProcessGroup();
  }
});

Deno.test("initProcessGroup names the backends it knows", async () => {
  await assert.rejects(
    // @ts-expect-error: not a backend
    initProcessGroup({ backend: "mpi", rank: 0, worldSize: 1 }),
    /unknown backend "mpi"; use one of gloo, nccl, emu, auto/,
  );
});
