/**
 * Worker for pipeline_test.ts. CASE picks the scenario:
 * - "train": the tiny GPT split over the world, trained by GPipe and 1F1B (a stage per rank) and
 *   Interleaved1F1B (two stages per rank), each from the same initial weights; what each run
 *   recorded on this rank;
 * - "kill": 1F1B with a stage per rank; rank KILL_RANK SIGKILLs itself in the forward of its
 *   fourth microbatch of the second step, and the survivors report their errors.
 * @module
 */

import {
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import * as parallel from "../../../src/parallel/mod.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { runWorker } from "../../_harness/worker.ts";
import { buildModel, gptLoss, MICROBATCHES, trainPipelined } from "./pipeline_problem.ts";

type Kind = "gpipe" | "1f1b" | "interleaved";

/** This rank's stages of the GPT split into `perRank` stages per rank. */
function stagesHere(perRank: number) {
  const world = getWorldSize(), rank = getRank(), numStages = world * perRank;
  const model = buildModel();
  const indices = Array.from({ length: perRank }, (_, i) => i * world + rank);
  const modules = indices.map((s) => parallel.splitGPT(model, s, numStages));
  const stages = modules.map((m, i) => new parallel.PipelineStage(m, indices[i], numStages));
  return { modules, stages, holdsFirst: rank === 0, holdsLast: indices.includes(numStages - 1) };
}

function schedule(kind: Kind, stages: parallel.PipelineStage[]): parallel.PipelineSchedule {
  if (kind === "gpipe") return new parallel.ScheduleGPipe(stages[0], MICROBATCHES, gptLoss);
  if (kind === "1f1b") return new parallel.Schedule1F1B(stages[0], MICROBATCHES, gptLoss);
  return new parallel.ScheduleInterleaved1F1B(stages, MICROBATCHES, gptLoss);
}

/** The message `attempt` throws, or "no error". */
function messageOf(attempt: () => unknown): string {
  try {
    attempt();
    return "no error";
  } catch (err) {
    return (err as Error).message;
  }
}

/** The errors of stages and schedules built for the wrong rank (every rank but 0 tries). */
function misplaced(): Record<string, string> {
  const world = getWorldSize(), rank = getRank(), model = buildModel();
  return {
    stage0: messageOf(() =>
      new parallel.PipelineStage(parallel.splitGPT(model, 0, world), 0, world)
    ),
    interleaved: messageOf(() => {
      const m = parallel.splitGPT(model, rank, 2 * world);
      const stage = new parallel.PipelineStage(m, rank, 2 * world);
      return new parallel.ScheduleInterleaved1F1B([stage], MICROBATCHES, gptLoss);
    }),
  };
}

async function train(): Promise<Record<string, unknown>> {
  const runs: Record<string, unknown> = {};
  for (const kind of ["gpipe", "1f1b", "interleaved"] as const) {
    const { modules, stages, holdsFirst, holdsLast } = stagesHere(kind === "interleaved" ? 2 : 1);
    const started = performance.now();
    const trace = await trainPipelined(modules, schedule(kind, stages), holdsFirst, holdsLast);
    runs[kind] = { ...trace, ms: performance.now() - started };
  }
  return { runs, errors: getRank() === 0 ? {} : misplaced() };
}

async function kill(): Promise<Record<string, unknown>> {
  const victim = Number(Deno.env.get("KILL_RANK"));
  const { modules, stages, holdsFirst, holdsLast } = stagesHere(1);
  if (getRank() === victim) {
    const m = modules[0], forward = m.forward.bind(m);
    let calls = 0;
    Object.defineProperty(m, "forward", {
      value: (x: Tensor) => {
        if (++calls === MICROBATCHES + 4) Deno.kill(Deno.pid, "SIGKILL");
        return forward(x);
      },
    });
  }
  await trainPipelined(modules, schedule("1f1b", stages), holdsFirst, holdsLast);
  return {};
}

await runWorker(async () => {
  // Point-to-point messages run on Gloo.
  await initProcessGroup({ timeoutMs: Number(Deno.env.get("TEST_TIMEOUT_MS") ?? 20_000) });
  try {
    return Deno.env.get("CASE") === "kill" ? await kill() : await train();
  } finally {
    await destroyProcessGroup();
  }
});
