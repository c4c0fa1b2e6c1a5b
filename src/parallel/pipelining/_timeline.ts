/**
 * A pipeline order laid out in time steps shared by every rank, and the messages each step moves.
 *
 * [Note: pipeline time steps]
 * A transport that runs a rank's messages one group at a time, each send waiting for its receive
 * (NCCL: the groups of a communicator run in order on its stream), deadlocks a schedule whose ranks
 * post their messages as they come: under 1F1B, rank 0 sends the activation of microbatch 1 while
 * rank 1 sends the gradient of microbatch 0, and each send waits for a receive queued behind the
 * other. PyTorch's multi-stage schedules avoid it with time steps shared by every rank: every
 * message's send and receive are posted in the step its sender produces it, all of one step's
 * messages in one group on every rank, so that each step's groups match one another completely
 * and nothing waits on a later step (a receiver waits for a payload only when it needs it; the
 * headers: [Note: pipeline messages in two batches] in _exchange.ts). Every rank knows every rank's order, so each derives the same steps: an
 * action runs in the first step after the one that sent what it needs (as soon as possible, one
 * action a rank a step, in the rank's order), and a rank with nothing to do waits (the bubble).
 * The same steps serve every transport: on one whose messages do not wait on each other (Gloo,
 * shared memory) a step's group is only a batch.
 * @module
 */

import { actionString, type PipelineAction, type PipelineOrder } from "./actions.ts";

/** A message between stages: an activation ("A") for `stage`, or a gradient ("G") for it. */
export interface StageMessage {
  readonly kind: "A" | "G";
  /** The stage it goes to. */
  readonly stage: number;
  readonly mb: number;
}

/** "A2:0": the activation of microbatch 0 for stage 2. */
export function messageKey(m: StageMessage): string {
  return `${m.kind}${m.stage}:${m.mb}`;
}

/** What `a` sends when it is done: its output to the next stage, or its input's gradient back. */
export function messageOf(a: PipelineAction, numStages: number): StageMessage | null {
  const to = a.type === "F" ? a.stage + 1 : a.stage - 1;
  if (to < 0 || to >= numStages) return null;
  return { kind: a.type === "F" ? "A" : "G", stage: to, mb: a.microbatch };
}

/** What `a` needs from another stage before it runs (the last stage's backward: nothing). */
export function messageFor(a: PipelineAction, numStages: number): StageMessage | null {
  if (a.type === "F") return a.stage === 0 ? null : { kind: "A", stage: a.stage, mb: a.microbatch };
  return a.stage === numStages - 1 ? null : { kind: "G", stage: a.stage, mb: a.microbatch };
}

/** The action on a rank that consumes `m`: the forward or backward of its stage and microbatch. */
export function consumerOf(m: StageMessage): PipelineAction {
  return { type: m.kind === "A" ? "F" : "B", stage: m.stage, microbatch: m.mb };
}

/** Every rank's actions placed in shared time steps (see [Note: pipeline time steps]). */
export interface PipelineTimeline {
  /** The number of steps. */
  readonly steps: number;
  /** By rank, then step: the action the rank runs in that step, or null (it waits). */
  readonly actions: readonly (PipelineAction | null)[][];
}

/**
 * Places every rank's actions, in its order, in the first step after the one that sent what each
 * needs (stage s runs on rank s mod ranks).
 *
 * @param order Every rank's actions.
 * @param numStages The pipeline's stages.
 * @returns The steps.
 * @throws Error when an action needs a message that no action before it sends (an order no
 *   transport could run).
 */
export function pipelineTimeline(order: PipelineOrder, numStages: number): PipelineTimeline {
  const next = order.map(() => 0), actions = order.map((): (PipelineAction | null)[] => []);
  const sentAt = new Map<string, number>();
  let left = order.reduce((n, list) => n + list.length, 0);
  for (let step = 0; left > 0; step++) {
    const sent: string[] = [];
    order.forEach((list, rank) => {
      const a = list[next[rank]];
      const need = a === undefined ? null : messageFor(a, numStages);
      const ready = a !== undefined &&
        (need === null || (sentAt.get(messageKey(need)) ?? step) < step);
      actions[rank].push(ready ? a : null);
      if (!ready) return;
      next[rank]++;
      left--;
      const m = messageOf(a, numStages);
      if (m !== null) sent.push(messageKey(m));
    });
    if (actions.every((list) => list[step] === null)) {
      const stuck = order.map((list, rank) => [rank, list[next[rank]]] as const)
        .filter(([, a]) => a !== undefined)
        .map(([rank, a]) =>
          `rank ${rank} at ${actionString(a!)} waits for ${messageKey(messageFor(a!, numStages)!)}`
        );
      throw new Error(`pipeline: the order cannot go on: ${stuck.join("; ")}, which no rank sends`);
    }
    for (const key of sent) sentAt.set(key, step);
  }
  return { steps: actions[0]?.length ?? 0, actions };
}
