/**
 * One rank of tests/train/train_cuda_test.ts's DDP test, started by the launcher once per GPU: it
 * joins an NCCL process group (env://, from the launcher), runs one DDP backward on an input of its
 * own and checks that its gradients are the average of what every rank's input gives a plain copy
 * of the model on this GPU. With one GPU that average is this rank's own gradient, still reduced
 * through DDP's buckets and NCCL on GPU memory; with several it differs from every rank's own.
 * Exits 0 after printing one line, or throws naming the parameter that differs.
 * @module
 */

import assert from "node:assert/strict";
import { manualSeed, nn, parallel, randn, type Tensor } from "../../../mod.ts";
import {
  destroyProcessGroup,
  getLocalRank,
  getRank,
  getWorldSize,
  initProcessGroup,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import { maxRelativeError } from "../../_harness/close.ts";

// 30 s: every NCCL call is aborted after this, so a hang ends well inside the test's 45 s.
await initProcessGroup({ backend: "nccl", timeoutMs: 30_000 });
try {
  assert.equal(worldGroup().backendName, "nccl");
  const rank = getRank(), world = getWorldSize();
  const device = `cuda:${getLocalRank()}`;
  const model = () => {
    manualSeed(7);
    return new nn.MLP([8, 16, 3]).to(device);
  };
  const input = (r: number): Tensor => {
    manualSeed(100 + r);
    return randn([4, 8]).to(device);
  };
  const lossOf = (m: nn.Module, x: Tensor) => (m.forward(x) as Tensor).pow(2).mean();

  const ddp = await parallel.DistributedDataParallel.create(model());
  await ddp.backward(lossOf(ddp, input(rank)));
  const actual = ddp.parameters().map((p) => Float32Array.from(p.grad!.toArray()));

  const expected = actual.map((g) => new Float32Array(g.length));
  for (let r = 0; r < world; r++) {
    const plain = model();
    lossOf(plain, input(r)).backward();
    plain.parameters().forEach((p, i) => {
      const g = p.grad!.toArray();
      for (let j = 0; j < g.length; j++) expected[i][j] += g[j] / world;
    });
  }
  let worst = 0;
  actual.forEach((g, i) => {
    const err = maxRelativeError(g, expected[i]);
    assert.ok(err <= 1e-5, `rank ${rank}: parameter ${i}'s gradient rel err ${err}`);
    worst = Math.max(worst, err);
  });
  console.log(`rank ${rank}: gradients are the average over ${world} rank(s) (rel err ${worst})`);
} finally {
  await destroyProcessGroup();
}
