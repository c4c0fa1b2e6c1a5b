// The NCCL calls that the collectives in tests/train/train_cuda_test.ts leave out, on an NCCL group
// of one rank: the barrier and the blocking all-reduce and reduce-scatter that tensor parallelism
// issues from the JavaScript thread (dt_nccl_barrier, dt_nccl_allreduce_blocking,
// dt_nccl_reduce_scatter_blocking). Runs where NCCL is: a GPU, or the host build with the NCCL
// stand-in (make test). The blocking send and receive need a peer, so two processes: not here.
import assert from "node:assert/strict";
import { tensor, zeros } from "../../mod.ts";
import {
  barrier,
  destroyProcessGroup,
  initProcessGroup,
  worldGroup,
} from "../../src/distributed/mod.ts";
import { freePort } from "../_harness/ranks.ts";
import { gpuTest } from "../_harness/devices.ts";

gpuTest("an NCCL group of one passes its barrier and runs the blocking collectives", async () => {
  await initProcessGroup({
    backend: "nccl",
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 30_000,
  });
  try {
    const group = worldGroup();
    assert.equal(group.backendName, "nccl");
    await barrier();
    const x = tensor([1, -2, 3, 4.5]).to("cuda");
    group.allReduceBlocking(x, "sum");
    const out = zeros([4], { device: "cuda" });
    group.reduceScatterBlocking(out, x, "max");
    assert.deepEqual(Array.from(out.toArray()), [1, -2, 3, 4.5]);
    await barrier();
  } finally {
    await destroyProcessGroup();
  }
});
