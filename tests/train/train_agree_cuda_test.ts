// The train job on the GPU against the same job on the cpu: DDP and FSDP, the MLP and the GPT, on
// two ranks over NCCL (one GPU each, cuda:0 and cuda:1; one rank where the machine has one GPU),
// from the same seed and data, log the same losses (each step's and the epoch's), gradient norms
// and validation loss and end with the same weights on every rank (relative error <= 1e-5;
// _train_agree.ts). The host build (csrc/cuda/host, NCCL's stand-in over Gloo) runs it on a
// CPU-only machine; ignored, with the reason in the name, where there is neither a GPU nor the
// host build. The pipeline (--pp 2) on cuda is pp_train_cuda_test.ts.
//
// Time: about 25 s on 2 cores with the host build (a GPT step there takes about 0.5 s); every
// subprocess gets 45 s, as in train_cuda_test.ts.
import assert from "node:assert/strict";
import { SMALL_JOB, smallCorpus } from "./_train.ts";
import { gpuTest } from "../_harness/devices.ts";
import { assertCudaRunsAsCpu, TINY_GPT } from "./_train_agree.ts";

/** The MLP for one epoch (8 steps on 2 ranks), so that the epoch's mean loss is logged too. */
const MLP = [...SMALL_JOB, "--epochs", "1"];

for (const strategy of ["ddp", "fsdp"]) {
  for (const model of ["mlp", "gpt"]) {
    gpuTest(
      `train --device cuda --strategy ${strategy} --model ${model} over NCCL, a GPU per rank, logs and ends as the cpu run`,
      async () => {
        await assertCudaRunsAsCpu(
          `dtrain_cuda_agree_${strategy}_${model}_`,
          async (dir) =>
            model === "mlp"
              ? [...MLP, "--strategy", strategy]
              : [...TINY_GPT, "--data-root", await smallCorpus(dir), "--strategy", strategy],
          (onCpu) => {
            if (model === "mlp") {
              assert.ok(onCpu.records.some((r) => r.kind === "epoch"), "the epoch's record");
            } else {
              assert.ok(onCpu.validation !== null, "the GPT run prints its validation loss");
            }
          },
        );
      },
    );
  }
}
