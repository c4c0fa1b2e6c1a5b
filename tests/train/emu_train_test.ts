// The train job on the emulated accelerator (`--device emu`): on 2 ranks, one emulated device per
// local rank (emu:0, emu:1), DDP and FSDP, the MLP and the GPT each end where the same job on the
// cpu ends (relative error <= 1e-5), so the whole device path of a multi-GPU run (placement, a
// device per rank, device collectives through "auto", pinned loading, device checkpoints) runs in
// CPU CI.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { assertSucceeded, readSaved, SMALL_JOB, smallCorpus, train } from "./_train.ts";

const TINY_GPT = [
  ...["--model", "gpt", "--n-layer", "1", "--n-head", "2", "--n-embd", "16"],
  ...["--block-size", "32", "--batch-size", "8", "--threads", "1"],
];

/** The largest relative error over the tensors, each as ||actual - expected|| / ||expected||. */
function relativeError(
  actual: Record<string, Float32Array | Int32Array>,
  expected: Record<string, Float32Array | Int32Array>,
): number {
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort());
  let worst = 0;
  for (const [name, want] of Object.entries(expected)) {
    const got = actual[name];
    let diff = 0, norm = 0;
    for (let i = 0; i < want.length; i++) {
      diff += (got[i] - want[i]) ** 2;
      norm += want[i] ** 2;
    }
    worst = Math.max(worst, Math.sqrt(diff / Math.max(norm, 1e-30)));
  }
  return worst;
}

/** Runs the job on `device` over 2 ranks; resolves to each rank's final weights. */
async function finalWeights(dir: string, device: string, job: string[]) {
  const dumps = join(dir, device, "dumps");
  await Deno.mkdir(dumps, { recursive: true });
  const run = await train([
    ...job,
    ...["--device", device, "--nproc-per-node", "2", "--master-port", String(freePort())],
    ...["--max-steps", "6", "--log-every", "3", "--snapshot", join(dir, device, "snap")],
  ], { timeoutMs: 90_000, env: { DTRAIN_WEIGHTS_DUMP: dumps } });
  assertSucceeded(run);
  assert.match(run.stdout, /^\[rank 0\] done: /m);
  return [0, 1].map((r) => readSaved(join(dumps, `rank${r}.safetensors`)).tensors);
}

for (const strategy of ["ddp", "fsdp"]) {
  for (const model of ["mlp", "gpt"]) {
    Deno.test(`train --device emu --strategy ${strategy} --model ${model} on 2 emulated devices ends equal to the cpu run`, async () => {
      await withTempDir(`dtrain_emu_${strategy}_${model}_`, async (dir) => {
        const job = model === "mlp"
          ? [...SMALL_JOB, "--strategy", strategy]
          : [...TINY_GPT, "--data-root", await smallCorpus(dir), "--strategy", strategy];
        const cpu = await finalWeights(dir, "cpu", job);
        const onEmu = await finalWeights(dir, "emu", job);
        for (const rank of [0, 1]) {
          const error = relativeError(onEmu[rank], cpu[rank]);
          assert.ok(error <= 1e-5, `rank ${rank}: emu vs cpu relative error ${error}`);
        }
        assert.ok(relativeError(onEmu[1], onEmu[0]) === 0, "both emu ranks end identical");
      });
    });
  }
}
