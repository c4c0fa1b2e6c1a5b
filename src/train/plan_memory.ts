/**
 * The planner's memory half: the peak of tensor bytes one rank of a train configuration holds,
 * counted from the model's shapes the way dtrain allocates (see [Note: what a step holds]), before
 * anything is allocated. `peakAllocatedBytes()` (src/tensor/storage.ts) measures the same thing.
 * @module
 */

import type { TrainConfig } from "./_schema.ts";
import { DATASET_SHAPES } from "./model.ts";
import { resolveDegrees } from "./_layout.ts";
import { type GptSizes, parameterCount } from "./footprint.ts";

/**
 * [Note: what a step holds]
 * Counted with the allocator's peak counter on dtrain's own Trainer (bench/plan_worker.ts), one
 * term changed at a time (layers, width, block, batch, heads), in float32 units of N = B·T tokens:
 * - every parameter's value, gradient and AdamW's two moments (one moment for SGD with momentum),
 *   gradients set to None between steps, so they exist only during the step;
 * - per block, 18·N·C floats saved for backward: both layer norms' inputs and outputs, q/k/v
 *   (3C), the attention output, the projections' outputs and residual sums, the MLP's 4C
 *   expansion before and after GELU (8C); attention keeps each row's log-sum-exp (B·H·T), not its
 *   T² probabilities (the fused kernel recomputes them);
 * - the logits, the cross-entropy's softmax and the logits' gradient (3·N·V), and the final
 *   norm's input and output (2·N·C);
 * - with activation checkpointing a checkpointed block keeps 5·N·C (its input and the
 *   recompute's bookkeeping) and the block being recomputed holds 10·N·C more;
 * - DDP peaks at the end of the forward, before any gradient exists, plus one bucket of gradients
 *   in flight; FSDP holds 1/W of every state and one gathered block (plus the next, prefetched);
 *   tensor parallelism splits the block's weights and its heads' activations but the residual
 *   stream is gathered for each matmul (21.5·N·C per block measured on 2 ranks); a pipeline
 *   stage holds its blocks' activations for every micro-batch of the step (measured with 2, 4
 *   and 8 micro-batches under 1F1B), what it sent and received, and the last stage a copy of the
 *   tied embedding.
 * These counts were measured on float32; bf16 autocast adds a bf16 copy of each weight used
 * (2 bytes per parameter) and keeps the matmul inputs' bf16 copies for backward.
 */

/** Bytes of one float32. */
const F32 = 4;

/** What one rank holds at its peak, in bytes, term by term. */
export interface MemoryPlan {
  /** Parameters, gradients and optimizer moments this rank keeps (its shard under FSDP). */
  states: number;
  /** Activations saved for backward, and what the backward pass holds at the peak. */
  activations: number;
  /** Logits, the loss's softmax and their gradient. */
  logits: number;
  /** Gathered weights (FSDP), bucketed gradients (DDP), collective buffers. */
  parallel: number;
  /** The batch's tensors (inputs and targets). */
  batch: number;
  /** The sum: the allocator's peak this rank should reach. */
  peak: number;
}

/** The degrees a config runs with on its whole world. */
function degreesOf(config: TrainConfig) {
  const world = config.nprocPerNode * config.nnodes;
  const d = resolveDegrees(config, world);
  return { world, ...d, dp: d.dpReplicate * d.dpShard };
}

/** How many optimizer moments each parameter has. */
export function momentsOf(config: TrainConfig): number {
  return config.optimizer === "adamw" ? 2 : config.momentum > 0 ? 1 : 0;
}

/**
 * The peak tensor bytes one rank of `config` holds during a training step, micro-batch
 * `config.batchSize`.
 *
 * @param config A validated train configuration.
 * @param gpt The GPT's sizes when they are not the flags' (an `--init-from` folder's).
 * @param vocabSize The vocabulary when it is known from the data (`--dataset tokens`).
 * @returns The peak and its terms.
 */
export function planMemory(config: TrainConfig, gpt?: GptSizes, vocabSize?: number): MemoryPlan {
  const { dp, dpShard, tp, pp } = degreesOf(config);
  const moments = momentsOf(config);
  const params = parameterCount(config, gpt);
  const B = config.batchSize;
  if (config.model !== "gpt") {
    const { inputs, outputs } = DATASET_SHAPES[config.dataset];
    const widths = [inputs, ...(config.model === "mlp" ? config.hidden : []), outputs];
    // Each layer keeps its input and its pre-activation output; backward holds one gradient more.
    const acts = widths.reduce((sum, w) => sum + 2 * B * w, 0);
    // DDP peaks at the end of the forward, before any gradient exists (see the note).
    const grads = config.strategy === "ddp" && dp > 1 ? 0 : 1;
    return total({
      states: params * F32 * (1 + moments + grads),
      activations: acts * F32,
      logits: 2 * B * outputs * F32,
      parallel: 0,
      batch: B * (inputs + 1) * F32,
    });
  }
  const L = gpt?.nLayer ?? config.nLayer, C = gpt?.nEmbd ?? config.nEmbd;
  const T = gpt?.blockSize ?? config.blockSize;
  const V = vocabSize ?? gpt?.vocabSize ?? DATASET_SHAPES[config.dataset].outputs;
  const H = config.nHead;
  const bias = config.bias ? 1 : 0;
  const perBlock = 12 * C * C + (2 + 11 * bias) * C;
  const outside = params - L * perBlock;
  // A pipeline stage holds its share of the blocks; its micro-batches are B / microbatches.
  const localL = Math.ceil(L / pp);
  const micro = pp > 1 ? Math.max(1, Math.floor(B / (config.microbatches || pp))) : B;
  // Measured: a stage's peak holds every micro-batch's saved activations (as GPipe), whatever
  // the schedule, so the step's whole batch counts.
  const inFlight = pp > 1 ? Math.floor(B / micro) : 1;
  const N = micro * T;
  const shard = config.strategy === "fsdp" ? dpShard : 1;
  const blockParams = perBlock / tp;
  // Values, gradients and moments of this rank's blocks and of what lies outside them.
  const stateCount = 2 + moments;
  const checkpointed = config.ac === "full"
    ? localL
    : config.ac === "selective"
    ? Math.floor(localL / config.acEvery)
    : 0;
  const kept = localL - checkpointed;
  const perBlockActs = tp > 1 ? 21.5 * N * C : 18 * N * C;
  const lse = B * H * T;
  // Beyond the terms counted, the measured peak holds up to 5.5·N·C more from width 256 on
  // (none at 64, 2·N·C at 128) unless every block is checkpointed: backward's temporaries of that
  // size, not yet attributed.
  const unattributed = kept > 0 ? Math.min(5.5, Math.max(0, (C - 64) * 5.5 / 192)) * N * C : 0;
  let activations = (kept * perBlockActs + checkpointed * 5 * N * C) * inFlight +
    (checkpointed > 0 ? 10 * N * C : 0) + 2 * N * C + lse + unattributed;
  let gradsAtPeak = localL * blockParams + (pp > 1 ? outside / pp : outside);
  let parallel = 0; // bytes
  if (config.strategy === "ddp" && dp > 1 && tp === 1 && pp === 1) {
    // DDP's peak is the end of the forward: no gradient yet but the first bucket's.
    gradsAtPeak = blockParams + outside / 2;
    activations += 2 * lse * localL;
  }
  if (config.strategy === "fsdp" && shard > 1) {
    activations += 2 * lse * localL;
    // Gathered whole while in use: the block computing and the one prefetched, the gathered
    // gradient before its reduce-scatter, and the embeddings and final norm (the root group).
    parallel = (3 * blockParams + outside) * F32;
  }
  if (tp > 1) activations += 4.5 * N * C;
  // A pipeline stage also holds the activations it sent and the gradients it received for every
  // micro-batch, and the last stage its own copy of the tied embedding (with its states).
  if (pp > 1) parallel += (2 * B * T * C + V * C * stateCount) * F32;
  const localParams = (localL * blockParams + (pp > 1 ? outside / pp : outside)) / shard;
  const values = localParams * (stateCount - 1) * F32;
  const states = values + (gradsAtPeak / shard) * F32;
  const vocabShards = config.lossParallel && tp > 1 ? tp : 1;
  // bf16 autocast: a bf16 copy of each weight, and per block the bf16 copies of the matmuls'
  // inputs and outputs kept for backward beside the f32 activations (58 bytes per token and
  // width, measured).
  const bf16 = config.dtype === "bf16" ? localParams * 2 + 58 * N * C * localL : 0;
  const common = { activations: activations * F32 + bf16, parallel, batch: 2 * B * T * 4 };
  // Two moments compete for the peak. At the loss's backward: the values and moments, every
  // saved activation, the logits, the loss's softmax and the logits' gradient (3·N·V), no
  // parameter gradient yet. At the end of backward: the gradients too, the logits (the
  // activations live until the step's scope ends) and backward's temporaries (2·N·256 floats
  // measured with the byte vocabulary; they do not grow with V: a 50,304-token job peaks at the
  // loss). Under DDP the first is the peak (gradsAtPeak above).
  const atLoss = total({ ...common, states: values, logits: 3 * N * V * F32 / vocabShards });
  const atEnd = total({
    ...common,
    states,
    logits: (N * V + 2 * N * Math.min(V, 256)) * F32 / vocabShards,
  });
  return atLoss.peak > atEnd.peak ? atLoss : atEnd;
}

function total(parts: Omit<MemoryPlan, "peak">): MemoryPlan {
  const peak = parts.states + parts.activations + parts.logits + parts.parallel + parts.batch;
  return { ...parts, peak: Math.round(peak) };
}
