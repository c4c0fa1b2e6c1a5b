/**
 * 3-D parallelism for `nn.GPT`: pipeline × FSDP × tensor parallelism on one `DeviceMesh`, in
 * torchtitan's order per stage (`parallelize_llama` after `pipeline_llama`): each stage the
 * model's layers split off by `splitGPT`, made tensor-parallel over the mesh's "tp" dimension,
 * activation-checkpointed, fully sharded per block and on the stage root over "dp_shard" (HSDP
 * with "dp_replicate"), then run by a schedule over the "pp" dimension's group.
 *
 * [Note: FSDP inside a schedule]
 * A stage whose module is an FSDP root runs each microbatch's backward through FSDP, all but the
 * step's last inside `noSync`: the full gradients add up in FSDP's pending buffer and are
 * reduce-scattered once per step, by the last microbatch's backward (PipelineStage.backwardOne).
 * The schedule then divides the shards' gradients by the number of microbatches and sums the
 * tied embedding's shard gradients between the first and last stage, whose TP and FSDP
 * coordinates are equal (the pp group's ranks differ only in "pp"), so they hold the same rows.
 * @module
 */

import { DeviceMesh } from "../../distributed/device_mesh.ts";
import type { GPT } from "../../nn/gpt.ts";
import type { Parameter } from "../../nn/parameter.ts";
import {
  type ActivationCheckpointOptions,
  applyActivationCheckpointing,
} from "../activation_checkpoint.ts";
import type { FullyShardOptions } from "../fsdp/_common.ts";
import { fullyShard } from "../fsdp/fully_shard.ts";
import { type GPTTensorParallelOptions, parallelizeGPT } from "../tensor_parallel/gpt_plan.ts";
import type { PipelineLoss, PipelineSchedule, PipelineScheduleOptions } from "./schedule.ts";
import { Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B } from "./schedules.ts";
import { type GPTStageModule, splitGPT } from "./split_gpt.ts";
import { PipelineStage } from "./stage.ts";

/** Options of {@linkcode parallelizePipelineGPT}. */
export interface PipelineGPTOptions extends PipelineScheduleOptions {
  /** The schedule (default "1f1b"). */
  schedule?: "gpipe" | "1f1b" | "interleaved";
  /** Microbatches per step. */
  nMicrobatches: number;
  /** The loss of one microbatch from the last stage's logits and its targets. */
  lossFn: PipelineLoss;
  /** Stages on each pipeline rank (default 2 for "interleaved", else 1). */
  stagesPerRank?: number;
  /** Blocks per stage, as `splitGPT`'s option (default: as even as possible). */
  layersPerStage?: number[];
  /** Tensor parallelism's options, on the mesh's "tp" dimension. */
  tp?: GPTTensorParallelOptions;
  /** Activation checkpointing of each stage's blocks (default: none). */
  ac?: Omit<ActivationCheckpointOptions, "blocks">;
  /** FSDP's options, on the mesh's "dp_shard" (and "dp_replicate") dimensions. */
  fsdp?: Omit<FullyShardOptions, "mesh" | "group">;
}

/** What {@linkcode parallelizePipelineGPT} made on this rank. */
export interface PipelineGPT {
  /** This rank's stage modules, in stage order (each the whole model's parameter names). */
  readonly modules: GPTStageModule[];
  /** Their pipeline stages. */
  readonly stages: PipelineStage[];
  /** The schedule over the mesh's "pp" group. */
  readonly schedule: PipelineSchedule;
  /** Whether this rank holds stage 0 (it passes the input to `schedule.step`). */
  readonly holdsFirst: boolean;
  /** Whether this rank holds the last stage (it passes the target and reads the losses). */
  readonly holdsLast: boolean;
  /** The stages' parameters (their shards), each once: what the optimizer takes. */
  parameters(): Parameter[];
}

/**
 * Splits `model` into pipeline stages over `mesh`'s "pp" dimension and parallelizes this rank's
 * stages as torchtitan does (see the module's note): `parallelizeGPT` over `mesh.get("tp")`,
 * activation checkpointing, `fullyShard` on every block and on the stage root over
 * `mesh.get("dp_shard")` (or `["dp_replicate", "dp_shard"]`: HSDP), and the schedule over
 * `mesh.getGroup("pp")`. The "tp" and data-parallel dimensions may be absent (or of size 1: then
 * not applied); "pp" may not. Every
 * rank passes an equal model (the same seed); the data-parallel ranks each pass their part of the
 * batch to `schedule.step`. Clip with {@linkcode clipGradNormPipeline}.
 *
 * @param model The whole GPT (its layers are shared by the stages, then sharded in place).
 * @param mesh The device mesh, with dimensions named "pp" and any of "dp_replicate",
 *   "dp_shard", "tp".
 * @param options See {@linkcode PipelineGPTOptions}.
 * @returns This rank's stages, modules and schedule.
 * @throws RangeError for a mesh without "pp" or with a dimension of another name, or what
 *   `splitGPT`, `parallelizeGPT`, `fullyShard` and the schedules throw.
 */
export function parallelizePipelineGPT(
  model: GPT,
  mesh: DeviceMesh,
  options: PipelineGPTOptions,
): PipelineGPT {
  const what = "parallelizePipelineGPT";
  if (!(mesh instanceof DeviceMesh)) throw new TypeError(`${what}: mesh must be a DeviceMesh`);
  const names = mesh.meshDimNames ?? [];
  const known = ["pp", "dp_replicate", "dp_shard", "tp"];
  const unknown = names.filter((n) => !known.includes(n));
  if (!names.includes("pp") || unknown.length > 0) {
    throw new RangeError(
      `${what}: the mesh's dimensions must be "pp" and any of "dp_replicate", "dp_shard", ` +
        `"tp", got (${names.join(", ")})`,
    );
  }
  const kind = options.schedule ?? "1f1b";
  const perRank = options.stagesPerRank ?? (kind === "interleaved" ? 2 : 1);
  const ppGroup = mesh.getGroup("pp"), numStages = ppGroup.size * perRank;
  const indices = Array.from({ length: perRank }, (_, i) => i * ppGroup.size + ppGroup.rank);
  // A dimension of size 1 changes nothing and is left out: a mesh's size-1 dimensions share one
  // process group, where FSDP's gathers in flight would meet TP's blocking all-reduces.
  const used = (n: string) => names.includes(n) && mesh.size(n) > 1;
  const dpNames = ["dp_replicate", "dp_shard"].filter(used);
  const dp = dpNames.length > 0 ? mesh.get(dpNames) : null;
  const modules = indices.map((s) => {
    const m = splitGPT(model, s, numStages, { layersPerStage: options.layersPerStage });
    if (used("tp")) parallelizeGPT(m, mesh.get("tp"), options.tp);
    const blocks = [...m.transformer.get("h").children()];
    if (options.ac && blocks.length > 0) {
      applyActivationCheckpointing(m, { ...options.ac, blocks: (n) => isBlock(n) });
    }
    if (dp !== null) {
      for (const block of blocks) fullyShard(block, { ...options.fsdp, mesh: dp });
      fullyShard(m, { ...options.fsdp, mesh: dp });
    }
    return m;
  });
  const stages = modules.map((m, i) =>
    new PipelineStage(m, indices[i], numStages, { group: ppGroup })
  );
  const { nMicrobatches: n, lossFn } = options;
  const scheduleOptions = { scaleGrads: options.scaleGrads };
  const schedule = kind === "gpipe"
    ? new ScheduleGPipe(stages[0], n, lossFn, scheduleOptions)
    : kind === "1f1b"
    ? new Schedule1F1B(stages[0], n, lossFn, scheduleOptions)
    : kind === "interleaved"
    ? new ScheduleInterleaved1F1B(stages, n, lossFn, scheduleOptions)
    : null;
  if (schedule === null) {
    throw new RangeError(`${what}: schedule must be "gpipe", "1f1b" or "interleaved", got ${kind}`);
  }
  return {
    modules,
    stages,
    schedule,
    holdsFirst: indices.includes(0),
    holdsLast: indices.includes(numStages - 1),
    parameters: () => [...new Set(modules.flatMap((m) => m.parameters()))],
  };
}

/** A block of a GPT stage, by its dotted name. */
function isBlock(name: string): boolean {
  return /^transformer\.h\.[^.]+$/.test(name);
}
