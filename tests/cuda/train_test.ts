// Training on the GPU: a GPT step on cuda against the same step on cpu (where nn.GPT exists), the
// train job under DDP and under FSDP over NCCL ("auto") on every visible GPU, every rank ending
// with the same weights, and FSDP on one GPU against FSDP on the cpu. Ignored, with the reason in
// the name, where there is no GPU.
import assert from "node:assert/strict";
import { cuda, manualSeed, nn, optim, parallel, randn, type Tensor, tensor } from "../../mod.ts";
import {
  allGather,
  allReduce,
  broadcast,
  destroyProcessGroup,
  initProcessGroup,
  reduceScatter,
  worldGroup,
} from "../../src/dist/mod.ts";
import { freePort } from "../_harness/ranks.ts";
import { load } from "../../src/checkpoint/mod.ts";
import { withTempDir } from "../_harness/processes.ts";
import { SMALL_JOB, train } from "../train/_train.ts";
import { gpuTest, hasGpu, noGpuReason, relativeError } from "./_gpu.ts";

type GPTModel = nn.Module & { forward(idx: Tensor, targets?: Tensor): unknown };
const GPT = (nn as unknown as Record<string, unknown>).GPT as
  | (new (config: Record<string, number>) => GPTModel)
  | undefined;

/** The loss of a forward pass, whether the model returns it alone or as [logits, loss]. */
function lossOf(out: unknown): Tensor {
  return (Array.isArray(out) ? out[1] : out) as Tensor;
}

/** One AdamW step of a small GPT on `device`; the loss and the weights after the step. */
function gptStep(device: string): { loss: number; weights: Float32Array } {
  manualSeed(1234);
  const model = new GPT!({ vocabSize: 97, blockSize: 32, nLayer: 2, nHead: 4, nEmbd: 64 }).to(
    device,
  );
  const opt = new optim.AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0.1 });
  const tokens = Int32Array.from({ length: 4 * 33 }, (_, i) => (i * 31 + 7) % 97);
  const idx = tensor(tokens.slice(0, 4 * 32), [4, 32], { dtype: "i32" }).to(device);
  const targets = tensor(tokens.slice(4, 4 * 32 + 4), [4, 32], { dtype: "i32" }).to(device);
  const loss = lossOf(model.forward(idx, targets));
  loss.backward();
  opt.step();
  const weights = model.parameters().map((p) => Array.from(p.toArray()));
  return { loss: loss.item(), weights: Float32Array.from(weights.flat()) };
}

const gptReason = !hasGpu
  ? noGpuReason.split(/[:(]/)[0].trim()
  : GPT
  ? ""
  : "nn.GPT does not exist yet";
Deno.test({
  name: `a GPT training step on cuda matches cpu (loss and weights, rel err <= 1e-3)${
    gptReason ? ` [skipped: ${gptReason}]` : ""
  }`,
  ignore: gptReason !== "",
}, () => {
  const cpu = gptStep("cpu"), gpu = gptStep("cuda");
  assert.ok(
    Math.abs(gpu.loss - cpu.loss) <= 1e-3 * Math.abs(cpu.loss),
    `${gpu.loss} vs ${cpu.loss}`,
  );
  const err = relativeError(gpu.weights, cpu.weights);
  assert.ok(err <= 1e-3, `weights rel err ${err}`);
});

/**
 * Runs the train job on every visible GPU with `args(dir)` (dir: a fresh folder) and checks that
 * every rank ends with the same weights, bit for bit (each rank dumps its whole model there; under
 * FSDP the gathered one).
 */
async function trainOnEveryGpu(prefix: string, args: (dir: string) => string[]): Promise<void> {
  const gpus = cuda.deviceCount();
  await withTempDir(prefix, async (dir) => {
    const run = await train(
      ["--device", "cuda", "--nproc-per-node", String(gpus), "--epochs", "1", ...args(dir)],
      { timeoutMs: 120_000, env: { DTRAIN_WEIGHTS_DUMP: dir } },
    );
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.leftovers, []);
    assert.match(run.stdout, /done: 1 epochs, loss \d/);
    const ranks = Array.from(
      { length: gpus },
      (_, r) => load(`${dir}/rank${r}.safetensors`).tensors,
    );
    for (const [name, t] of Object.entries(ranks[0])) {
      for (let r = 1; r < gpus; r++) {
        assert.deepEqual(ranks[r][name].toArray(), t.toArray(), `rank ${r} differs in ${name}`);
      }
    }
  });
}

gpuTest("train --device cuda under DDP over NCCL on every visible GPU: ranks agree", async () => {
  await trainOnEveryGpu("dtrain-cuda-ddp-", () => SMALL_JOB);
});

gpuTest(
  "an NCCL group of one rank runs every collective on GPU memory, and DDP trains over it",
  async () => {
    await initProcessGroup({
      backend: "nccl",
      initMethod: `tcp://127.0.0.1:${freePort()}`,
      rank: 0,
      worldSize: 1,
      timeoutMs: 60_000,
    });
    try {
      assert.equal(worldGroup().backendName, "nccl");
      const x = tensor([1, 2, 3, 4]).to("cuda");
      await allReduce(x, "sum");
      await broadcast(x, 0);
      const gathered = tensor(new Float32Array(4)).to("cuda");
      await allGather(gathered, x);
      const scattered = tensor(new Float32Array(4)).to("cuda");
      await reduceScatter(scattered, x, "sum");
      for (const t of [x, gathered, scattered]) {
        assert.deepEqual(Array.from(t.toArray()), [
          1,
          2,
          3,
          4,
        ]);
      }
      // A host tensor cannot go through NCCL: refused with the device named.
      assert.throws(
        () => allReduce(tensor([1])),
        /a tensor is on cpu, which the nccl backend cannot reach/,
      );

      manualSeed(2);
      const model = new nn.Linear(8, 2).to("cuda");
      const ddp = await parallel.DistributedDataParallel.create(model, {
        mixedPrecision: { paramDtype: "bf16", reduceDtype: "f32" },
      });
      const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
      const input = tensor(new Float32Array(32).fill(0.5), [4, 8]).to("cuda");
      const first = ddp.forward(input).pow(2).mean();
      await ddp.backward(first);
      opt.step();
      assert.ok(ddp.forward(input).pow(2).mean().item() < first.item());
    } finally {
      cuda.setMatmulPrecision("highest");
      await destroyProcessGroup();
    }
  },
);

gpuTest(
  "train --device cuda --strategy fsdp over NCCL on every visible GPU: ranks agree",
  async () => {
    await trainOnEveryGpu(
      "dtrain-cuda-fsdp-",
      (dir) => ["--strategy", "fsdp", "--snapshot", `${dir}/snapshots`, ...SMALL_JOB],
    );
  },
);

/** Three SGD steps of a fully sharded MLP on `device` in a world of one; its final weights. */
async function fsdpSteps(device: string, backend: "gloo" | "nccl"): Promise<Float32Array> {
  await initProcessGroup({
    backend,
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 60_000,
  });
  try {
    manualSeed(3);
    const model = new nn.MLP([16, 32, 4]).to(device);
    for (const layer of model.children()) parallel.fullyShard(layer);
    const sharded = parallel.fullyShard(model);
    const opt = new optim.SGD(sharded.parameters(), { lr: 0.1 });
    const x = randn([8, 16]).to(device);
    for (let step = 0; step < 3; step++) {
      const loss = sharded.forward(x).pow(2).mean();
      await sharded.backward(loss);
      nn.utils.clipGradNorm(sharded.parameters(), 1);
      opt.step();
      opt.zeroGrad();
    }
    const state = await parallel.fullStateDict(sharded);
    return Float32Array.from(Object.values(state).flatMap((t) => Array.from(t.toArray())));
  } finally {
    await destroyProcessGroup();
  }
}

gpuTest(
  "FSDP over NCCL on one GPU (blocking all-gathers, clipping) matches FSDP on the cpu",
  async () => {
    const cpu = await fsdpSteps("cpu", "gloo");
    const gpu = await fsdpSteps("cuda", "nccl");
    const err = relativeError(gpu, cpu);
    assert.ok(err <= 1e-4, `weights rel err ${err}`);
  },
);
