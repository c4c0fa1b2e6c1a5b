/**
 * The planner's time half: one training step's seconds on one rank, from the model's FLOPs (as
 * nanoGPT's `estimate_mfu` and the PaLM paper's appendix B count them: 6 per parameter per token,
 * plus attention's), the memory-bound work, the kernel calls and the collectives, each divided by
 * this machine's measured rate (plan_machine.ts).
 * @module
 */

import type { TrainConfig } from "./_schema.ts";
import { DATASET_SHAPES } from "./model.ts";
import { resolveDegrees } from "./_layout.ts";
import { type GptSizes, parameterCount } from "./footprint.ts";
import type { MachineNumbers } from "./plan_machine.ts";
import { momentsOf } from "./plan_memory.ts";

/** One step's predicted seconds on one rank, term by term. */
export interface TimePlan {
  /** FLOPs of the forward and backward (and AC's recompute) on this rank. */
  flops: number;
  /** Matrix products at the measured matmul rate. */
  compute: number;
  /** Elementwise work and the optimizer at the measured copy bandwidth. */
  memoryBound: number;
  /** Kernel calls at the measured cost of a small one. */
  calls: number;
  /** Collectives at the measured all-reduce bandwidth and latency. */
  communication: number;
  /**
   * How much slower the ranks compute for sharing the cores, with each other and with the
   * machine's present load (1 when each thread has a core of its own).
   */
  oversubscription: number;
  /** How much slower the machine computes now, under its present load, than when measured. */
  load: number;
  /** The sum: the step's seconds. */
  seconds: number;
}

/** The threads a rank computes with: `--threads`, else the launcher's share of the cores. */
export function rankThreads(config: TrainConfig): number {
  if (config.threads > 0) return config.threads;
  const cores = navigator.hardwareConcurrency;
  const launched = config.nprocPerNode > 1 || config.nnodes > 1;
  return launched ? Math.max(1, Math.floor(cores / config.nprocPerNode)) : cores;
}

/** The measured f32 matmul rate for an inner size `n`, interpolated between the sizes measured. */
function matmulRate(machine: MachineNumbers, n: number): number {
  const sizes = Object.keys(machine.matmulFlops).map(Number).sort((a, b) => a - b);
  const clamped = Math.min(Math.max(n, sizes[0]), sizes[sizes.length - 1]);
  const hi = sizes.find((s) => s >= clamped)!, lo = [...sizes].reverse().find((s) => s <= clamped)!;
  if (hi === lo) return machine.matmulFlops[hi];
  const f = Math.log(clamped / lo) / Math.log(hi / lo);
  return machine.matmulFlops[lo] ** (1 - f) * machine.matmulFlops[hi] ** f;
}

/** Seconds of an all-reduce of `bytes` among `ranks` (ring: 2(n-1)/n of the bytes each way). */
function allReduceSeconds(machine: MachineNumbers, bytes: number, ranks: number): number {
  if (ranks <= 1) return 0;
  const { bytesPerSecond, latencySeconds } = machine.allReduce;
  // The probe ran on 2 ranks, which move the bytes once (2(n-1)/n = 1).
  return latencySeconds * (ranks - 1) + (2 * (ranks - 1) / ranks) * bytes / bytesPerSecond;
}

/**
 * One training step's seconds on one rank of `config` (micro-batch `config.batchSize`, one
 * optimizer step per micro-batch).
 *
 * @param config A validated train configuration.
 * @param machine This machine's numbers at the ranks' thread count.
 * @param gpt The GPT's sizes when they are not the flags'.
 * @param vocabSize The vocabulary when it is known from the data.
 */
export function planTime(
  config: TrainConfig,
  machine: MachineNumbers,
  gpt?: GptSizes,
  vocabSize?: number,
  load = 1,
): TimePlan {
  const world = config.nprocPerNode * config.nnodes;
  const { dpReplicate, dpShard, tp, pp } = resolveDegrees(config, world);
  const dp = dpReplicate * dpShard;
  const params = parameterCount(config, gpt);
  const B = config.batchSize;
  const cores = navigator.hardwareConcurrency;
  // The ranks' threads share the cores with each other and with the machine's other work: `load`
  // is how much slower one thread runs now than when the machine was measured, which on `cores`
  // cores means about load·cores − 1 other runnable threads; the job's own threads join them.
  const ownThreads = config.nprocPerNode * rankThreads(config);
  const others = load > 1 ? load * cores - 1 : 0;
  const oversubscription = Math.max(1, (others + ownThreads) / cores);
  let flops: number, elementBytes: number, calls: number, width: number;
  if (config.model !== "gpt") {
    const { inputs, outputs } = DATASET_SHAPES[config.dataset];
    const widths = [inputs, ...(config.model === "mlp" ? config.hidden : []), outputs];
    flops = 6 * B * params;
    elementBytes = widths.reduce((s, w) => s + 4 * B * w * 4, 0);
    // Per layer a matmul, a bias and an activation, each forward and backward; the loss; and
    // the optimizer's update of each weight and bias.
    calls = 3 * (widths.length - 1) + 5 + 2 * (widths.length - 1);
    width = Math.max(...widths.slice(1));
  } else {
    const L = Math.ceil((gpt?.nLayer ?? config.nLayer) / pp), C = gpt?.nEmbd ?? config.nEmbd;
    const T = gpt?.blockSize ?? config.blockSize;
    const V = vocabSize ?? gpt?.vocabSize ?? DATASET_SHAPES[config.dataset].outputs;
    const N = B * T;
    // Per token: 2 flops per weight forward and 4 backward; causal attention 2·T·C forward.
    const blockForward = 2 * 12 * C * C / tp + 2 * T * C / tp;
    const checkpointed = config.ac === "full"
      ? L
      : config.ac === "selective"
      ? Math.floor(L / config.acEvery)
      : 0;
    flops = N * (3 * L * blockForward + checkpointed * blockForward + 6 * V * C / tp);
    // Each block's saved activations are written forward, read and their gradients written and
    // read backward; the logits likewise; the optimizer reads and writes every state.
    elementBytes = 4 * 18 * N * C * 4 * L / tp + 4 * 3 * N * V * 4 / tp +
      2 * (2 + momentsOf(config)) * params * 4 / (tp * dpShard);
    // About 15 autograd ops per block (two norms, four linears, attention, GELU, residuals), ten
    // outside (embeddings, final norm, head, loss), the optimizer's update of each tensor.
    calls = 15 * (L + checkpointed) + 10 + (4 + 12 * L);
    width = C;
  }
  // The bf16 engine's rate relative to f32's at the size both were measured at.
  const dtypeRate = config.dtype === "bf16"
    ? machine.bf16MatmulFlops / machine.matmulFlops[256]
    : 1;
  // A pipeline of pp stages over m micro-batches idles (pp − 1) of its m + pp − 1 slots (the
  // bubble), and runs each op once per micro-batch.
  const microbatches = pp > 1 ? config.microbatches || pp : 1;
  const bubble = (microbatches + pp - 1) / microbatches;
  const compute = flops / (matmulRate(machine, width) * dtypeRate) * oversubscription * bubble;
  const memoryBound = elementBytes / machine.copyBytesPerSecond * oversubscription * bubble;
  const callSeconds = calls * microbatches * machine.opSeconds * oversubscription * bubble;
  let communication = 0;
  const gradBytes = params * 4 / (tp * pp);
  if (config.strategy === "ddp") communication += allReduceSeconds(machine, gradBytes, dp);
  else {communication += 1.5 * allReduceSeconds(machine, gradBytes, dpShard) +
      allReduceSeconds(machine, gradBytes / dpShard, dpReplicate);}
  if (tp > 1 && config.model === "gpt") {
    const L = Math.ceil(config.nLayer / pp), N = B * config.blockSize;
    // Per block two all-gathers and two reduce-scatters forward, as many backward.
    communication += 4 * L * allReduceSeconds(machine, N * config.nEmbd * 4, tp);
  }
  if (pp > 1 && config.model === "gpt") {
    const N = B * config.blockSize;
    communication += 2 * (pp - 1) * allReduceSeconds(machine, N * config.nEmbd * 4 / 2, 2);
  }
  // Shared-memory collectives are copies by the ranks' threads: they share the cores as well.
  communication *= oversubscription;
  const seconds = compute + memoryBound + callSeconds + communication;
  return {
    flops,
    compute,
    memoryBound,
    calls: callSeconds,
    communication,
    oversubscription,
    load,
    seconds,
  };
}
