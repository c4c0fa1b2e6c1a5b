// Pipeline parallelism on the GPU: train --pp 2 on two ranks (cuda:0 and cuda:1), their stages'
// activations and gradients over NCCL point-to-point, under GPipe, 1F1B and Interleaved 1F1B,
// logs the same losses, gradient norms and validation loss (the held-out batches forward through
// the stages) and ends with the same weights on both ranks as the same job on the cpu (relative
// error <= 1e-5; _train_agree.ts). 1F1B and Interleaved 1F1B are the schedules whose messages
// deadlock on NCCL unless every rank posts them in the same time steps ([Note: pipeline time
// steps] in src/parallel/pipelining/_timeline.ts). Ignored, with the reason in the name, where
// there is neither a GPU nor the host build, and named "[needs 2 GPUs]" where there is one GPU
// (two ranks cannot share one: NCCL refuses a communicator with the same GPU twice).
//
// Time: about 30 s on 2 cores with the host build; every subprocess gets 45 s.
import assert from "node:assert/strict";
import { cuda } from "../../mod.ts";
import { smallCorpus } from "./_train.ts";
import { gpuTest, hasGpu } from "../_harness/devices.ts";
import { assertCudaRunsAsCpu, TINY_GPT } from "./_train_agree.ts";

/** A test of two stages on two GPUs: ignored, saying so, where there is only one. */
function twoGpuTest(name: string, fn: () => Promise<void>): void {
  if (hasGpu && cuda.deviceCount() < 2) {
    Deno.test({ name: `${name} [needs 2 GPUs, 1 visible]`, ignore: true, fn });
  } else {
    gpuTest(name, fn);
  }
}

for (const schedule of ["gpipe", "1f1b", "interleaved"]) {
  twoGpuTest(
    `train --pp 2 --pp-schedule ${schedule} --device cuda over NCCL point-to-point logs and ends as the cpu run`,
    async () => {
      // Two stages a rank under interleaved: 4 blocks for 2 ranks.
      const layers = schedule === "interleaved" ? "4" : "2";
      await assertCudaRunsAsCpu(
        `dtrain_cuda_pp_${schedule}_`,
        async (dir) => [
          ...[...TINY_GPT, "--n-layer", layers, "--data-root", await smallCorpus(dir)],
          ...["--pp", "2", "--pp-schedule", schedule, "--microbatches", "4"],
        ],
        (onCpu) => assert.ok(onCpu.validation !== null, "the run prints its validation loss"),
      );
    },
  );
}
