// Training on the GPU (the GPT step against the cpu's is tests/nn/gpt_cuda_test.ts): DDP's
// gradients over a real NCCL group on every visible GPU (the average over ranks, one rank per GPU,
// even with one GPU) and the train job under DDP where there are several GPUs, the train job under
// FSDP over NCCL ("auto") on every visible GPU, every rank ending with the same weights, and FSDP
// on one GPU against FSDP on the cpu (on emu too, over the emu backend). Ignored, with the reason
// in the name, where there is no GPU; the train job on 2 emulated devices is
// tests/train/emu_train_test.ts.
//
// Time bounds (scripts/gpu_check.sh runs this file as one step): every subprocess gets 45 s and
// every in-process NCCL group aborts a call after 30 s, so one NCCL hang costs at most 45 s and the
// tests after it still run.
import assert from "node:assert/strict";
import { cuda, manualSeed, nn, optim, parallel, randn, tensor } from "../../mod.ts";
import {
  allGather,
  allReduce,
  broadcast,
  destroyProcessGroup,
  initProcessGroup,
  reduceScatter,
  worldGroup,
} from "../../src/distributed/mod.ts";
import { freePort } from "../_harness/ranks.ts";
import { load } from "../../src/checkpoint/mod.ts";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import { SMALL_JOB, train } from "./_train.ts";
import { type Accelerator, deviceTest, gpuTest } from "../_harness/devices.ts";
import { maxRelativeError } from "../_harness/close.ts";

/** A subprocess's limit: an NCCL hang in it costs this much, then it is killed. */
const SUBPROCESS_MS = 45_000;
/** An in-process NCCL group's limit on each call (it aborts the communicator after it). */
const GROUP_MS = 30_000;

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
      { timeoutMs: SUBPROCESS_MS, env: { DTRAIN_WEIGHTS_DUMP: dir } },
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

gpuTest(
  "DDP over NCCL on every visible GPU (a real group, one rank per GPU): gradients are the average",
  async () => {
    const gpus = cuda.deviceCount();
    const run = await runDeno({
      timeoutMs: SUBPROCESS_MS,
      args: [
        `${ROOT}src/launch/main.ts`,
        ...["--nproc-per-node", String(gpus), "--master-port", String(freePort())],
        `${ROOT}tests/train/workers/ddp_grads_cuda.ts`,
      ],
    });
    assert.equal(run.code, 0, `${run.stderr}\n${run.stdout}`);
    assert.deepEqual(run.leftovers, []);
    for (let r = 0; r < gpus; r++) {
      assert.match(run.stdout, new RegExp(`rank ${r}: gradients are the average over ${gpus} `));
    }
    // The train job under DDP: with one GPU it trains alone, without a group, so only with several.
    // Its snapshot in the test's folder: the default, runs/default/, would resume another run's.
    if (gpus > 1) {
      await trainOnEveryGpu(
        "dtrain-cuda-ddp-",
        (dir) => ["--snapshot", `${dir}/snapshot.safetensors`, ...SMALL_JOB],
      );
    }
  },
);

gpuTest(
  "an NCCL group of one rank runs every collective on GPU memory, and DDP trains over it",
  async () => {
    await initProcessGroup({
      backend: "nccl",
      initMethod: `tcp://127.0.0.1:${freePort()}`,
      rank: 0,
      worldSize: 1,
      timeoutMs: GROUP_MS,
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
async function fsdpSteps(
  device: string,
  backend: "gloo" | "nccl" | "emu",
): Promise<Float32Array> {
  await initProcessGroup({
    backend,
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: GROUP_MS,
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

/** Each accelerator's device collective backend. */
const DEVICE_BACKEND: Record<Accelerator, "nccl" | "emu"> = { "cuda:0": "nccl", "emu:0": "emu" };

deviceTest(
  "FSDP over the device backend on one device (blocking all-gathers, clipping) matches FSDP on the cpu",
  async (device) => {
    const cpu = await fsdpSteps("cpu", "gloo");
    const onDevice = await fsdpSteps(device, DEVICE_BACKEND[device]);
    const err = maxRelativeError(onDevice, cpu);
    assert.ok(err <= 1e-4, `weights rel err ${err}`);
  },
);
