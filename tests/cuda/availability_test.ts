// Without a GPU, CUDA reports itself unavailable with the reason, and everything that would need
// it fails with that reason instead of crashing: checked in a child process that has no GPU
// (workers/no_gpu_checks.ts). A gloo group refuses accelerator memory on every machine, and a real
// device tensor on each accelerator.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { tensor } from "../../mod.ts";
import { allReduce, destroyProcessGroup, initProcessGroup } from "../../src/distributed/mod.ts";
import { freePort } from "../_harness/ranks.ts";
import { ROOT } from "../_harness/processes.ts";
import { claimingGpu, deviceTest, hasGpu, isHostBuild } from "../_harness/devices.ts";

/** The library a process without a GPU opens: the real one where it was built, else none. */
const REAL_LIBRARY = `${ROOT}build/libdtrain_cuda.so`;

// Where the GPU tests run on the host build (DTRAIN_CUDA_LIB names it: scripts/test.sh), this
// process has "GPUs"; what a machine without one does is checked in a child that has none: the
// real library where nvcc built it (no driver here), else a library path that does not exist.
// On a machine with a real GPU there is no such child to make, and the test is ignored.
Deno.test({
  name: `without a GPU, CUDA says why and everything needing it fails with that reason${
    hasGpu && !isHostBuild ? " [skipped: this machine has a GPU]" : ""
  }`,
  ignore: hasGpu && !isHostBuild,
}, async () => {
  const library = existsSync(REAL_LIBRARY)
    ? REAL_LIBRARY
    : `${ROOT}build/no-such-libdtrain_cuda.so`;
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["test", "-A", "--no-check", "tests/cuda/workers/no_gpu_checks.ts"],
    cwd: ROOT,
    env: { DTRAIN_CUDA_LIB: library, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(120_000),
  }).output();
  const out = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
  assert.equal(code, 0, out);
  assert.match(out, /ok \| 4 passed \| 0 failed/, out);
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
    const onGpu = claimingGpu(x);
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
