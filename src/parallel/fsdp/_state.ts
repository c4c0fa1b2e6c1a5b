/**
 * The state `fullyShard` attaches to each module (FSDP2's `FSDPState`): its parameter group and,
 * on the root of an FSDP tree, the step: forward order, backward, `noSync` and statistics.
 * @module
 */

import { backwardAsync } from "../../tensor/autograd.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import { type FSDPStats, TrainingState } from "./_common.ts";
import type { FSDPParamGroup, StepRecorder } from "./_param_group.ts";

const emptyStats = (): FSDPStats => ({
  forwardCommMs: 0,
  backwardMs: 0,
  exposedCommMs: 0,
  allGathers: 0,
  forwardPrefetches: 0,
  reduceScatters: 0,
  allGatherBytes: 0,
  reduceScatterBytes: 0,
  allReduces: 0,
  allReduceBytes: 0,
});

/** One `fullyShard` call's state; the last call over a tree is its root. */
export class FSDPState implements StepRecorder {
  /** Statistics of the last synchronised step. */
  lastStats: FSDPStats = emptyStats();
  /** The root of the tree this state belongs to (itself until a parent is sharded). */
  root: FSDPState = this;
  /** Every group under this state's module, its own included (meaningful on the root). */
  groups: FSDPParamGroup[] = [];
  #forwardOrder: FSDPParamGroup[] = [];
  /** The forward order of the last step that ran backward: what forward prefetches by. */
  #lastForwardOrder: FSDPParamGroup[] = [];
  #counting = emptyStats();
  #inBackward = false;
  #sync = true;
  #keepsGathered = false;

  /** @param group The group of this call's own parameters (set right after construction). */
  constructor(public group: FSDPParamGroup | null = null) {}

  /** Whether the root's backward is running. */
  get inBackward(): boolean {
    return this.#inBackward;
  }

  /** Whether gradients are reduced (false inside `noSync`). */
  get sync(): boolean {
    return this.#sync;
  }

  /** Whether forwards without a graph keep the full parameters (inside `keepGathered`). */
  get keepsGathered(): boolean {
    return this.#keepsGathered;
  }

  /**
   * Runs `fn`, whose forwards run without a graph (an evaluation), with each group's full
   * parameters gathered once and kept for all of them, then reshards every group. An evaluation
   * of k batches otherwise gathers the whole model k times, where no backward or optimizer step
   * can change the shards in between; the price is the full model's memory for its duration, as
   * DDP holds all along.
   */
  async keepGathered<R>(fn: () => R | Promise<R>): Promise<R> {
    if (this.root !== this) throw new Error("FSDP: keepGathered() must be called on the root");
    if (this.#inBackward) throw new Error("FSDP.keepGathered: a backward is in progress");
    this.#keepsGathered = true;
    try {
      return await fn();
    } finally {
      this.#keepsGathered = false;
      for (const group of this.groups) group.reshard();
    }
  }

  /** Records `group`'s forward, once per step. */
  ranForward(group: FSDPParamGroup): void {
    if (!this.#forwardOrder.includes(group)) this.#forwardOrder.push(group);
  }

  /** The group that ran forward just before `group`: the next one backward reaches. */
  nextInBackward(group: FSDPParamGroup): FSDPParamGroup | undefined {
    const i = this.#forwardOrder.indexOf(group);
    return i > 0 ? this.#forwardOrder[i - 1] : undefined;
  }

  /** The group that ran forward just after `group` in the last step: the one to prefetch. */
  nextInForward(group: FSDPParamGroup): FSDPParamGroup | undefined {
    const i = this.#lastForwardOrder.indexOf(group);
    return i >= 0 ? this.#lastForwardOrder[i + 1] : undefined;
  }

  /**
   * After the root's forward: waits for a prefetched all-gather the forward did not use (its
   * order differed from the last step's, or it failed) and frees what it gathered. `quiet` (when
   * the forward already failed) keeps a second failure from hiding the first.
   */
  endForward(quiet: boolean): void {
    for (const group of this.groups) {
      try {
        group.dropPrefetch();
      } catch (err) {
        if (!quiet) throw err;
      }
    }
  }

  /** Adds to the step's counters. */
  count(what: keyof FSDPStats, n: number): void {
    this.#counting[what] += n;
  }

  /** The root's backward: see `FSDPModule.backward`. */
  async backward(loss: Tensor, gradient?: Tensor): Promise<void> {
    if (this.root !== this) {
      throw new Error(
        "FSDP: backward() must be called on the root module (the last one fullyShard wrapped)",
      );
    }
    if (this.#inBackward) throw new Error("FSDP.backward: a backward is already in progress");
    this.#inBackward = true;
    // A pipeline schedule runs several microbatches' forwards before their backwards (1F1B's
    // last backwards follow no forward): the order recorded by the last forward holds for them.
    if (this.#forwardOrder.length === 0) this.#forwardOrder = this.#lastForwardOrder;
    // Kept through backward: nextInBackward reads it to prefetch.
    const order = this.#forwardOrder;
    try {
      const start = performance.now();
      await backwardAsync(loss, gradient);
      const backwardEnd = performance.now();
      for (const group of [...order].reverse()) group.postBackward();
      const results = await Promise.allSettled(order.map((g) => g.finishBackward()));
      const failure = results.find((r) => r.status === "rejected");
      if (failure) throw (failure as PromiseRejectedResult).reason;
      if (this.#sync) {
        this.count("exposedCommMs", performance.now() - backwardEnd);
        this.lastStats = { ...this.#counting, backwardMs: backwardEnd - start };
        this.#counting = emptyStats();
      }
    } finally {
      for (const group of order) group.training = TrainingState.Idle;
      if (order.length > 0) this.#lastForwardOrder = order;
      this.#forwardOrder = [];
      this.#inBackward = false;
    }
  }

  /** See `FSDPModule.noSync`. */
  async noSync<R>(fn: () => R | Promise<R>): Promise<R> {
    const previous = this.#sync;
    this.#sync = false;
    try {
      return await fn();
    } finally {
      this.#sync = previous;
    }
  }
}
