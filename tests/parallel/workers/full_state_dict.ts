/**
 * Worker for full_state_dict_test.ts. LAYOUT picks the mesh and what runs on it:
 * - "tp" (2 ranks): the tiny GPT made tensor-parallel;
 * - "tp_fsdp" (4 ranks, 2 (dp) × 2 (tp)): then fully sharded per block and on the root over dp;
 * - "3d" (8 ranks): HSDP × TP on a 2 (dp_replicate) × 2 (dp_shard) × 2 (tp) mesh, then, on a
 *   2 (pp) × 2 (dp_shard) × 2 (tp) mesh, the GPT split into 2 pipeline stages, each made
 *   tensor-parallel and fully sharded (parallelizePipelineGPT).
 * Each model reports `fullStateDict` (every tensor's shape and values) right after it is
 * parallelized and, but for the pipeline, after STEPS clipped AdamW steps on this data-parallel
 * rank's part of each batch of ROWS sequences; a trained model is then saved sharded under DIR
 * (env) and consolidated by rank 0, and each rank tries `saveObject` on its own state dict.
 * @module
 */

import * as checkpoint from "../../../src/checkpoint/mod.ts";
import {
  destroyProcessGroup,
  type DeviceMesh,
  getRank,
  initDeviceMesh,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import type { Module, StateDict } from "../../../src/nn/module.ts";
import * as parallel from "../../../src/parallel/mod.ts";
import { crossEntropy } from "../../../src/tensor/ops/cross_entropy.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { runWorker } from "../../_harness/worker.ts";
import { buildModel, GPT_CONFIG, trainParts } from "./tp_problem.ts";

/** Sequences per batch, the same for every layout (and the reference). */
export const ROWS = 8;

/** A state dict as the test reads it: each tensor's shape and values. */
export type Whole = Record<string, { shape: number[]; values: number[] }>;

/**
 * What one parallelized model reports: its whole state before and (if trained) after; a pipeline
 * rank's holds its stage's tensors only.
 */
export interface Report {
  label: string;
  stage: boolean;
  initial: Whole;
  final: Whole | null;
  /** Rank 0's consolidation of a sharded checkpoint of the trained model (its path). */
  consolidated?: string | null;
  /** What saveObject of the trained model's own state dict (its shards) said. */
  saveObjectRefused?: string | null;
}

function whole(state: StateDict): Whole {
  return Object.fromEntries(
    Object.entries(state).map(([k, t]) => [k, { shape: [...t.shape], values: [...t.toArray()] }]),
  );
}

/** The tiny GPT on `tp`, fully sharded over `dp` when given, trained on part `part` of `parts`. */
async function tensorParallel(
  label: string,
  tp: DeviceMesh,
  dp: DeviceMesh | null,
  part: number,
  parts: number,
): Promise<Report> {
  const model = parallel.parallelizeGPT(buildModel(), tp);
  let backward = (loss: Tensor): Promise<void> | void => loss.backward();
  if (dp !== null) {
    for (const block of model.transformer.h) parallel.fullyShard(block, { mesh: dp });
    const root = parallel.fullyShard(model, { mesh: dp });
    backward = (loss) => root.backward(loss);
  }
  const initial = whole(await parallel.fullStateDict(model));
  await trainParts(model, part, parts, backward, ROWS);
  const final = whole(await parallel.fullStateDict(model));
  // The other ways out of whole tensors: a consolidated sharded checkpoint, and saveObject, which
  // must refuse this rank's shards.
  const dir = `${Deno.env.get("DIR")}/${label.replace(/\W+/g, "_")}`;
  await checkpoint.saveSharded(dir, { model });
  if (getRank() === 0) checkpoint.consolidate(dir, `${dir}.safetensors`);
  let saveObjectRefused: string | null = null;
  try {
    checkpoint.saveObject(`${dir}/rank-${getRank()}-object.safetensors`, {
      model: model.stateDict(),
    });
  } catch (err) {
    saveObjectRefused = (err as Error).message;
  }
  return {
    label,
    stage: false,
    initial,
    final,
    consolidated: getRank() === 0 ? `${dir}.safetensors` : null,
    saveObjectRefused,
  };
}

/** This rank's pipeline stages' fullStateDicts, merged: the whole model is every pp rank's. */
async function pipeline(mesh: DeviceMesh): Promise<Report> {
  const p = parallel.parallelizePipelineGPT(buildModel(), mesh, {
    nMicrobatches: 2,
    lossFn: (logits, targets) =>
      crossEntropy(logits.reshape([-1, GPT_CONFIG.vocabSize]), targets.reshape([-1])),
  });
  const stages: Whole = {};
  for (const m of p.modules as Module[]) {
    Object.assign(stages, whole(await parallel.fullStateDict(m)));
  }
  return { label: "PP 2 × FSDP 2 × TP 2", stage: true, initial: stages, final: null };
}

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 30_000 });
  try {
    const layout = Deno.env.get("LAYOUT");
    const reports: Report[] = [];
    if (layout === "tp") {
      const mesh = await initDeviceMesh("cpu", [2], { meshDimNames: ["tp"] });
      reports.push(await tensorParallel("TP 2", mesh, null, 0, 1));
    } else if (layout === "tp_fsdp") {
      const mesh = await initDeviceMesh("cpu", [2, 2], { meshDimNames: ["dp", "tp"] });
      const [dp] = mesh.getCoordinate();
      reports.push(await tensorParallel("TP 2 × FSDP 2", mesh.get("tp"), mesh.get("dp"), dp, 2));
    } else if (layout === "3d") {
      const hsdp = await initDeviceMesh("cpu", [2, 2, 2], {
        meshDimNames: ["dp_replicate", "dp_shard", "tp"],
      });
      const [replicate, shard] = hsdp.getCoordinate();
      const dp = hsdp.get(["dp_replicate", "dp_shard"]);
      reports.push(
        await tensorParallel("HSDP 2 × 2 × TP 2", hsdp.get("tp"), dp, replicate * 2 + shard, 4),
      );
      const pp = await initDeviceMesh("cpu", [2, 2, 2], { meshDimNames: ["pp", "dp_shard", "tp"] });
      reports.push(await pipeline(pp));
    } else {
      throw new Error(`LAYOUT must be tp, tp_fsdp or 3d, got ${layout}`);
    }
    return { reports };
  } finally {
    await destroyProcessGroup();
  }
});
