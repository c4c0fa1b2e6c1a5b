/**
 * The train job's planner: before any tensor is allocated, each rank's peak memory
 * (plan_memory.ts) and step time (plan_time.ts) for the job's own flags. `deno task plan FLAGS`
 * and `deno task train FLAGS --dry-run` print it; the train job refuses a plan whose ranks on
 * this node do not fit in its available memory, and `--batch-size auto` picks the largest
 * micro-batch that fits.
 * @module
 */

import { existsSync } from "node:fs";
import { join } from "node:path";
import type { TrainConfig } from "./_schema.ts";
import { ConfigError, parseTrainArgs } from "./config.ts";
import type { GptSizes } from "./footprint.ts";
import { taskShape } from "./model.ts";
import { readPretrainedConfig } from "../nn/gpt_pretrained.ts";
import { type MemoryPlan, planMemory } from "./plan_memory.ts";
import { planTime, rankThreads, type TimePlan } from "./plan_time.ts";
import { machineNumbers, presentSlowdown } from "./plan_machine.ts";
import { bytes } from "./footprint.ts";

/** A configuration's plan for one rank. */
export interface Plan {
  /** The micro-batch it was planned for. */
  batchSize: number;
  /** Ranks on this node. */
  ranksOnNode: number;
  /** Peak tensor bytes per rank, term by term. */
  memory: MemoryPlan;
  /** The peak resident set per rank: tensors and the runtime's baseline. */
  rssBytes: number;
  /** One step's time per rank, or null when not asked for. */
  time: TimePlan | null;
}

/**
 * The memory the ranks on this node may use: DTRAIN_MEM_AVAILABLE (bytes, for tests and for
 * planning another machine), else /proc/meminfo's MemAvailable, else null (not Linux).
 */
export function availableMemory(): number | null {
  const given = Deno.env.get("DTRAIN_MEM_AVAILABLE");
  if (given !== undefined) {
    const n = Number(given);
    if (!(n > 0)) throw new RangeError(`DTRAIN_MEM_AVAILABLE: expected bytes, got ${given}`);
    return n;
  }
  try {
    const line = Deno.readTextFileSync("/proc/meminfo").split("\n")
      .find((l) => l.startsWith("MemAvailable:"));
    return line ? Number(line.split(/\s+/)[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** What the model's shapes are read from besides the flags: a pretrained folder, meta.json. */
function shapesOf(config: TrainConfig): { gpt?: GptSizes; vocabSize?: number } {
  const from = config.initFrom;
  if (config.model === "gpt" && from !== "scratch" && from !== "resume") {
    if (existsSync(join(from, "config.json"))) {
      const c = readPretrainedConfig(from, {});
      return { gpt: { ...c, source: `${from}/config.json's` }, vocabSize: c.vocabSize };
    }
  }
  return config.dataset === "tokens" ? { vocabSize: taskShape(config).outputs } : {};
}

/** The baseline resident bytes of one rank when the machine was not measured (Deno + libs). */
const BASELINE_RSS = 80 * 2 ** 20;

/**
 * Plans `config` for one rank of this node: {@linkcode planSync}'s memory, with the step time and
 * the runtime's baseline from this machine's numbers (measured once, then cached).
 *
 * @param config A validated train configuration.
 */
export async function planConfig(config: TrainConfig): Promise<Plan> {
  const plan = planSync(config);
  const { gpt, vocabSize } = shapesOf(config);
  const threads = rankThreads(config);
  const machine = await machineNumbers(threads);
  const load = presentSlowdown(machine, threads);
  return {
    ...plan,
    rssBytes: plan.memory.peak + machine.baselineRssBytes,
    time: planTime(config, machine, gpt, vocabSize, load),
  };
}

/**
 * Why `plan` does not fit this node's available memory, or null: the ranks on this node's
 * predicted resident sets against MemAvailable.
 */
export function unfitReason(plan: Plan, available: number | null): string | null {
  if (available === null) return null;
  const perRank = available / plan.ranksOnNode;
  if (plan.rssBytes <= perRank) return null;
  return `the plan needs ${bytes(plan.rssBytes)} per rank (peak tensors ` +
    `${bytes(plan.memory.peak)} and the runtime's baseline) × ${plan.ranksOnNode} rank(s) on ` +
    `this node, but ${bytes(available)} is available (MemAvailable, or DTRAIN_MEM_AVAILABLE; ` +
    `${bytes(perRank)} per ` +
    `rank); lower --batch-size (or --batch-size auto), shard with --strategy fsdp, or turn on ` +
    `--ac full`;
}

/** The plan as the lines `deno task plan` and `--dry-run` print. */
export function formatPlan(config: TrainConfig, plan: Plan, available: number | null): string {
  const m = plan.memory;
  const world = config.nprocPerNode * config.nnodes;
  const shape = config.model === "gpt"
    ? `gpt n_layer ${config.nLayer}, n_embd ${config.nEmbd}, n_head ${config.nHead}, block ` +
      `${config.blockSize}`
    : `${config.model} ${config.model === "mlp" ? config.hidden.join(",") : ""}`;
  const lines = [
    `plan: ${shape}; micro-batch ${plan.batchSize}, ${config.dtype}, --strategy ` +
    `${config.strategy} --tp ${config.tp} --pp ${config.pp} --ac ${config.ac}, world size ` +
    `${world} (${plan.ranksOnNode} on this node)`,
    `  peak tensor memory per rank: ${bytes(m.peak)} (states ${bytes(m.states)}, activations ` +
    `${bytes(m.activations)}, logits ${bytes(m.logits)}, gathered/buckets ${bytes(m.parallel)}, ` +
    `batch ${bytes(m.batch)})`,
    `  peak RSS per rank: ${bytes(plan.rssBytes)}`,
  ];
  if (plan.time !== null) {
    const t = plan.time, ms = (s: number) => `${(s * 1000).toFixed(1)} ms`;
    lines.push(
      `  step time per rank: ${ms(t.seconds)} (matmuls ${ms(t.compute)}, memory-bound ` +
        `${ms(t.memoryBound)}, kernel calls ${ms(t.calls)}, collectives ` +
        `${ms(t.communication)}; ${(t.flops / 1e9).toPrecision(3)} GFLOP` +
        (t.oversubscription > 1
          ? `; ${t.oversubscription.toFixed(2)}× for cores shared by the ranks and the ` +
            `machine's present load (${t.load.toFixed(2)}× on one thread)`
          : "") +
        ")",
    );
  }
  if (available !== null) {
    const reason = unfitReason(plan, available);
    lines.push(
      reason === null
        ? `  fits: ${bytes(available)} available on this node`
        : `  does not fit: ${reason}`,
    );
  }
  return lines.join("\n");
}

/** The value of `--batch-size` in `args` (either spelling), with its position, or null. */
function batchFlag(args: string[]): { at: number; width: number; value: string } | null {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--batch-size" && i + 1 < args.length) {
      return { at: i, width: 2, value: args[i + 1] };
    }
    if (args[i].startsWith("--batch-size=")) {
      return { at: i, width: 1, value: args[i].slice("--batch-size=".length) };
    }
  }
  return null;
}

/**
 * `--batch-size auto`: the arguments with the largest micro-batch whose plan fits this node's
 * memory in its place. The global batch is the one the job would run without the flag (its
 * default micro-batch × --gradient-accumulation-steps); the micro-batch divides it and, with
 * `--dataset tokens`, the accumulation grows to keep it, as Composer's auto micro-batching
 * does. Arguments without `--batch-size auto` come back unchanged.
 *
 * @param args The train job's arguments.
 * @param notes Collects a line saying what was picked.
 * @throws ConfigError when not even a micro-batch of 1 fits.
 */
export function resolveAutoBatch(args: string[], notes: string[] = []): string[] {
  const flag = batchFlag(args);
  if (flag === null || flag.value !== "auto") return args;
  const rest = [...args.slice(0, flag.at), ...args.slice(flag.at + flag.width)];
  const config = parseTrainArgs(rest);
  if (config === "help") return rest;
  const available = availableMemory();
  const global = config.batchSize;
  const accumulates = config.dataset === "tokens";
  const fits = (b: number) =>
    available === null ||
    unfitReason(planSync({ ...config, batchSize: b }), available) === null;
  let chosen = 0;
  for (let b = global; b >= 1; b--) {
    if (accumulates && global % b !== 0) continue;
    if (fits(b)) {
      chosen = b;
      break;
    }
  }
  if (chosen === 0) {
    throw new ConfigError(
      "batchSize",
      `auto: not even a micro-batch of 1 fits: ${
        unfitReason(planSync({ ...config, batchSize: 1 }), available)
      }`,
    );
  }
  const out = [...rest, "--batch-size", String(chosen)];
  let note = `--batch-size auto: micro-batch ${chosen}`;
  if (accumulates && chosen < global) {
    const steps = config.gradientAccumulationSteps * (global / chosen);
    out.push("--gradient-accumulation-steps", String(steps));
    note += `, --gradient-accumulation-steps ${steps} (global batch ${
      global * config.gradientAccumulationSteps
    } samples kept)`;
  } else if (chosen < global) {
    note += ` (below the default ${global}: this job has no gradient accumulation, so its ` +
      `batch shrinks)`;
  }
  notes.push(note);
  return out;
}

/** The memory-only plan (no machine measurement), synchronously. */
export function planSync(config: TrainConfig): Plan {
  const { gpt, vocabSize } = shapesOf(config);
  const memory = planMemory(config, gpt, vocabSize);
  return {
    batchSize: config.batchSize,
    ranksOnNode: config.nprocPerNode,
    memory,
    rssBytes: memory.peak + BASELINE_RSS,
    time: null,
  };
}
