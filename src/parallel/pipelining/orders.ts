/**
 * The three schedules' action lists, per rank, after PyTorch 2.13's
 * `torch.distributed.pipelining.schedules`: GPipe (all forwards, then all backwards), 1F1B (as
 * `Schedule1F1B._step_microbatches` runs it) and Interleaved 1F1B (`_get_1f1b_rank_ops` with
 * `_get_warmup_ops`, several stages per rank, stage s on rank s mod ranks).
 * @module
 */

import type { PipelineAction, PipelineOrder } from "./actions.ts";

function checkCount(what: string, value: number, where: string): void {
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`${where}: ${what} must be a positive integer, got ${value}`);
  }
}

const forward = (stage: number, microbatch: number): PipelineAction => ({
  type: "F",
  stage,
  microbatch,
});
const backward = (stage: number, microbatch: number): PipelineAction => ({
  type: "B",
  stage,
  microbatch,
});

/**
 * GPipe: each rank (stage) runs every microbatch's forward, then every backward, in microbatch
 * order (PyTorch's `ScheduleGPipe`).
 *
 * @param numStages The stages, one per rank.
 * @param nMicrobatches The microbatches per step.
 */
export function gpipeOrder(numStages: number, nMicrobatches: number): PipelineOrder {
  checkCount("numStages", numStages, "ScheduleGPipe");
  checkCount("nMicrobatches", nMicrobatches, "ScheduleGPipe");
  const mbs = Array.from({ length: nMicrobatches }, (_, i) => i);
  return Array.from({ length: numStages }, (_, s) => [
    ...mbs.map((m) => forward(s, m)),
    ...mbs.map((m) => backward(s, m)),
  ]);
}

/**
 * 1F1B: stage s runs min(nMicrobatches, numStages − s) forwards to warm up, then alternates one
 * backward and one forward, then runs the remaining backwards (what PyTorch's `Schedule1F1B`
 * executes; its `pipeline_order` IR numbers the last rank's forwards from 1, a slip this list
 * does not copy).
 *
 * @param numStages The stages, one per rank.
 * @param nMicrobatches The microbatches per step, at least `numStages` (as PyTorch requires).
 */
export function oneFOneBOrder(numStages: number, nMicrobatches: number): PipelineOrder {
  checkCount("numStages", numStages, "Schedule1F1B");
  checkCount("nMicrobatches", nMicrobatches, "Schedule1F1B");
  if (nMicrobatches < numStages) {
    throw new RangeError(
      `Schedule1F1B: nMicrobatches (${nMicrobatches}) must be at least the number of stages ` +
        `(${numStages})`,
    );
  }
  return Array.from({ length: numStages }, (_, s) => {
    const actions: PipelineAction[] = [];
    const warmup = Math.min(nMicrobatches, numStages - s);
    let f = 0, b = 0;
    while (f < warmup) actions.push(forward(s, f++));
    while (f < nMicrobatches) {
      actions.push(backward(s, b++));
      actions.push(forward(s, f++));
    }
    while (b < nMicrobatches) actions.push(backward(s, b++));
    return actions;
  });
}

/**
 * Interleaved 1F1B (Megatron's virtual stages, PyTorch's `ScheduleInterleaved1F1B`): rank r holds
 * stages r, r + ranks, r + 2·ranks, ...; microbatches go through in rounds of
 * nMicrobatches / max(1, ⌊nMicrobatches / ranks⌋), depth first (a round through every local
 * stage before the next round starts).
 *
 * @param ranks The ranks of the pipeline group.
 * @param stagesPerRank The stages each rank holds.
 * @param nMicrobatches The microbatches per step, a multiple of the number of rounds.
 */
export function interleavedOrder(
  ranks: number,
  stagesPerRank: number,
  nMicrobatches: number,
): PipelineOrder {
  const where = "ScheduleInterleaved1F1B";
  checkCount("the number of ranks", ranks, where);
  checkCount("stagesPerRank", stagesPerRank, where);
  checkCount("nMicrobatches", nMicrobatches, where);
  const rounds = Math.max(1, Math.floor(nMicrobatches / ranks));
  if (nMicrobatches % rounds !== 0) {
    throw new RangeError(
      `${where}: nMicrobatches (${nMicrobatches}) must be a multiple of the number of rounds ` +
        `(${rounds})`,
    );
  }
  const perRound = nMicrobatches / rounds;
  const total = stagesPerRank * nMicrobatches;
  return Array.from({ length: ranks }, (_, rank) => {
    const warmup = Math.min((stagesPerRank - 1) * perRound + 2 * (ranks - 1 - rank), total);
    const fwdStage = (op: number) => (Math.floor(op / perRound) % stagesPerRank) * ranks + rank;
    const bwdStage = (op: number) =>
      (stagesPerRank - 1 - (Math.floor((op - warmup) / perRound) % stagesPerRank)) * ranks + rank;
    const nextF = new Map<number, number>(), nextB = new Map<number, number>();
    const take = (next: Map<number, number>, stage: number) => {
      const m = next.get(stage) ?? 0;
      next.set(stage, m + 1);
      return m;
    };
    const actions: PipelineAction[] = [];
    // Warm-up ops run a forward, steady ops a forward and a backward, cool-down ops a backward.
    for (let op = 0; op < total + warmup; op++) {
      if (op < total) {
        const s = fwdStage(op);
        actions.push(forward(s, take(nextF, s)));
      }
      if (op >= warmup) {
        const s = bwdStage(op);
        actions.push(backward(s, take(nextB, s)));
      }
    }
    return actions;
  });
}
