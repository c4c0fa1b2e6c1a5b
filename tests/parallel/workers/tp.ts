/**
 * Worker for tp_test.ts. CASE picks the scenario:
 * - "train": the differentiable collectives on rank-dependent tensors, the bad plans' errors,
 *   then the tiny GPT trained under each MODES entry (parallelizeGPT options, optionally with
 *   activation checkpointing), with what each parameter holds;
 * - "kill": rank KILL_RANK SIGKILLs itself inside the first block's attention forward of the
 *   second step, and the survivors report their errors.
 * @module
 */

import {
  destroyProcessGroup,
  type DeviceMesh,
  diagnoseError,
  getRank,
  getWorldSize,
  initDeviceMesh,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import { GPT } from "../../../src/nn/gpt.ts";
import { Embedding, Linear } from "../../../src/nn/layers.ts";
import { Sequential } from "../../../src/nn/container.ts";
import * as parallel from "../../../src/parallel/mod.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { runWorker } from "../../_harness/worker.ts";
import { relativeError } from "../../_harness/close.ts";
import { batch, buildModel, GPT_CONFIG, placements, train } from "./tp_problem.ts";

/**
 * Each differentiable collective on x = [r·10 + i] (2 × 4, rank r), with loss sum(y · w) for
 * w = [i + 1 + r·100] of y's shape, so that backward's gradient differs per rank: the forward
 * values and x's gradient.
 */
let tpMesh: DeviceMesh;

function collectives(): Record<string, { y: number[]; shape: number[]; grad: number[] }> {
  const group = tpMesh.getGroup(), r = getRank();
  const ops: Record<string, (x: Tensor) => Tensor> = {
    allReduceIdentity: (x) => parallel.allReduceIdentity(x, group),
    identityAllReduce: (x) => parallel.identityAllReduce(x, group),
    allGatherReduceScatter: (x) => parallel.allGatherReduceScatter(x, 1, group),
    reduceScatterAllGather: (x) => parallel.reduceScatterAllGather(x, 1, group),
    allGatherSplit: (x) => parallel.allGatherSplit(x, 0, group),
    splitAllGather: (x) => parallel.splitAllGather(x, 1, group),
  };
  const out: Record<string, { y: number[]; shape: number[]; grad: number[] }> = {};
  for (const [name, op] of Object.entries(ops)) {
    tidy(() => {
      const x = tensor(Float32Array.from({ length: 8 }, (_, i) => r * 10 + i), [2, 4]);
      x.requiresGrad = true;
      const y = op(x);
      const w = tensor(Float32Array.from({ length: y.numel() }, (_, i) => i + 1 + r * 100), [
        ...y.shape,
      ]);
      y.mul(w).sum().backward();
      out[name] = {
        y: Array.from(y.toArray()),
        shape: [...y.shape],
        grad: Array.from(x.grad!.toArray()),
      };
    });
  }
  return out;
}

/**
 * The styles the GPT plan does not use: a column-parallel Embedding (output gathered), a
 * row-parallel Linear splitting a replicated input, and PrepareModuleOutput gathering a
 * column-parallel output; each rank's output and gradient shards against the same module
 * unsharded (built from the same seed in this process).
 */
function otherStyles(): Record<string, number> {
  const build = () => {
    manualSeed(5);
    return new Sequential(new Embedding(16, 8), new Linear(8, 6), new Linear(6, 4));
  };
  const ids = tensor([1, 9, 15, 0, 3, 9], [2, 3], { dtype: "i32" });
  const run = (m: Sequential) => {
    const y = m.forward(ids);
    const w = tensor(Float32Array.from({ length: y.numel() }, (_, i) => Math.sin(i)), [...y.shape]);
    y.mul(w).sum().backward();
    return y;
  };
  const plain = build(), sharded = build();
  parallel.parallelizeModule(sharded, tpMesh, {
    "0": new parallel.ColwiseParallel({ outputLayouts: new parallel.Replicate() }),
    "1": new parallel.RowwiseParallel({ inputLayouts: new parallel.Replicate() }),
    "2": new parallel.ColwiseParallel(),
  });
  parallel.parallelizeModule(sharded, tpMesh, {
    "2": new parallel.PrepareModuleOutput({
      outputLayouts: new parallel.Shard(-1),
      desiredOutputLayouts: new parallel.Replicate(),
    }),
  });
  const errors: Record<string, number> = {};
  tidy(() => {
    const want = run(plain), got = run(sharded);
    errors.output = relativeError(got.toArray(), want.toArray());
    const plainParams = Object.fromEntries(plain.namedParameters());
    const r = getRank();
    for (const [name, p] of sharded.namedParameters()) {
      const full = plainParams[name].grad!, held = parallel.tensorParallelPlacement(p);
      let part = full;
      if (held?.placement instanceof parallel.Shard) {
        const d = held.placement.dim, n = full.shape[d] / 2;
        part = full.narrow(d, r * n, n).contiguous();
      }
      errors[name] = relativeError(p.grad!.toArray(), part.toArray());
    }
  });
  return errors;
}

/** The error message of each bad plan (every rank runs the same ones). */
function badPlans(): Record<string, string> {
  const attempts: Record<string, () => unknown> = {
    unknownName: () =>
      parallel.parallelizeModule(buildModel(), tpMesh, {
        "transformer.h.*.attn.c_atn": new parallel.ColwiseParallel(),
      }),
    wrongType: () =>
      parallel.parallelizeModule(buildModel(), tpMesh, {
        "transformer.ln_f": new parallel.ColwiseParallel(),
      }),
    notDivisible: () =>
      parallel.parallelizeModule(new Sequential(new Linear(4, 5)), tpMesh, {
        "0": new parallel.ColwiseParallel(),
      }),
    headsNotDivisible: () => parallel.parallelizeGPT(new GPT({ ...GPT_CONFIG, nHead: 1 }), tpMesh),
    tiedUnstyled: () =>
      parallel.parallelizeModule(buildModel(), tpMesh, { lm_head: new parallel.ColwiseParallel() }),
    notAStyle: () =>
      parallel.parallelizeModule(buildModel(), tpMesh, {
        lm_head: {} as unknown as parallel.ParallelStyle,
      }),
  };
  const errors: Record<string, string> = {};
  for (const [name, attempt] of Object.entries(attempts)) {
    try {
      attempt();
      errors[name] = "no error";
    } catch (err) {
      errors[name] = (err as Error).message;
    }
  }
  return errors;
}

/** One MODES entry: parallelizeGPT's options, and activation checkpointing applied after. */
export interface Mode extends parallel.GPTTensorParallelOptions {
  label: string;
  /** "selective" checkpoints every second block. */
  ac?: "full" | "selective";
}

function trainModes(): unknown[] {
  const modes = JSON.parse(Deno.env.get("MODES")!) as Mode[];
  return modes.map(({ label: _, ac, ...options }) => {
    const started = performance.now();
    const model = parallel.parallelizeGPT(buildModel(), tpMesh, options);
    const wrapped = ac === undefined ? [] : parallel.applyActivationCheckpointing(
      model,
      ac === "full" ? { mode: ac } : {
        mode: ac,
        every: 2,
      },
    );
    const trace = train(model);
    return { ...trace, wrapped, placements: placements(model), ms: performance.now() - started };
  });
}

async function kill(): Promise<Record<string, unknown>> {
  const victim = Number(Deno.env.get("KILL_RANK"));
  const model = parallel.parallelizeGPT(buildModel(), tpMesh, { sequenceParallel: true });
  let step = 0;
  if (getRank() === victim) {
    const attn = [...model.transformer.h][0].attn;
    const forward = attn.forward.bind(attn);
    Object.defineProperty(attn, "forward", {
      value: (x: Tensor) => {
        if (step === 1) Deno.kill(Deno.pid, "SIGKILL");
        return forward(x);
      },
    });
  }
  for (; step < 3; step++) {
    try {
      trainStep();
    } catch (err) {
      // The blocking gather could not wait for the group's diagnosis: it runs here.
      throw await diagnoseError(err);
    }
  }
  return {};

  function trainStep(): void {
    tidy(() => {
      const [x, y] = batch(step);
      let loss: Tensor;
      try {
        loss = model.forward(x, y).loss;
      } catch (err) {
        console.log(`failed in forward of step ${step}`);
        throw err;
      }
      loss.backward();
    });
  }
}

await runWorker(async () => {
  const world = await initProcessGroup({
    backend: "gloo",
    timeoutMs: Number(Deno.env.get("TEST_TIMEOUT_MS") ?? 20_000),
  });
  tpMesh = await initDeviceMesh("cpu", [getWorldSize()], { meshDimNames: ["tp"] });
  try {
    if (Deno.env.get("CASE") === "kill") return await kill();
    return {
      collectives: collectives(),
      errors: badPlans(),
      otherStyles: otherStyles(),
      modes: trainModes(),
      backend: world.backendName,
    };
  } finally {
    await destroyProcessGroup();
  }
});
