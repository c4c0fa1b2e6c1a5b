/**
 * The parameters of one `fullyShard` call, which communicate together (FSDP2's
 * `_fsdp_param_group.py`): one all-gather unshards them, one reduce-scatter reduces their
 * gradients. The verbs are FSDP2's: `unshard` issues the all-gather, `waitForUnshard` waits and
 * copies out, `reshard` frees the full parameters. This file decides when each collective runs;
 * _collectives.ts issues them.
 *
 * [Note: FSDP hooks]
 * Forward is synchronous, so it cannot await a collective; it blocks instead. The root records the
 * order in which groups run forward. From the second step on, each group's pre-forward, once its own
 * full parameters are in, starts the all-gather of the group that ran forward after it in the last
 * step on a native thread (`ProcessGroup.allGatherStart`), so that gather runs while this group
 * computes; that group's pre-forward then only waits for it (a blocking wait), and only what the
 * compute did not hide counts in `forwardCommMs`. A group with nothing prefetched (the first step,
 * the first group, a backend that cannot start a gather: nccl, shm+gloo) gathers with a blocking
 * all-gather. At most one gather is in flight in forward, and every rank starts the same ones in
 * the same order (the same graph, the same recorded order); the root's post-forward waits for and
 * frees one the forward never used (see FSDPState.endForward). Evaluation forwards prefetch by the
 * same order but record none. The post-forward puts an identity node over each output tensor whose
 * pre-backward hook (see [Note: pre-backward hooks] in src/tensor/autograd.ts) issues the group's
 * all-gather and the next group's (prefetch, in reverse forward order) and returns the wait, which
 * `backwardAsync` awaits before any node that reads the group's parameters runs. When every full
 * parameter's gradient is accumulated (the post-accumulate-grad hooks), the gradients are copied
 * into the reduce-scatter input, the full parameters are freed, and the reduce-scatter runs off
 * the JavaScript thread while backward goes on (under HSDP, followed by an all-reduce across the
 * replicas: see [Note: replicate all-reduce order] in _replicate.ts). Every rank runs the same
 * graph, so collectives are issued in the same order everywhere.
 * @module
 */

import { BlockingWork, type ProcessGroup, type Work } from "../../distributed/mod.ts";
import { isGradEnabled, record } from "../../tensor/autograd.ts";
import { Tensor } from "../../tensor/tensor.ts";
import type { ResolvedPolicy } from "../mixed_precision.ts";
import { type CommCounter, ShardedState, TrainingState } from "./_common.ts";
import {
  allGatherShards,
  copyIn,
  copyOut,
  reduceGradients,
  type Reduction,
  takeReduction,
} from "./_collectives.ts";
import { setRecomputePreparation } from "../../nn/utils/checkpoint.ts";
import type { FSDPParam } from "./_param.ts";

/** What a group tells, and asks, the root of its FSDP tree during a step. */
export interface StepRecorder {
  /** Whether the root's `backward` is running. */
  readonly inBackward: boolean;
  /** Whether gradients are reduced (false inside `noSync`). */
  readonly sync: boolean;
  /** The root's own group. */
  readonly group: FSDPParamGroup | null;
  /** Whether forwards without a graph keep the full parameters (see `FSDPState.keepGathered`). */
  readonly keepsGathered: boolean;
  /** Called by each group's pre-forward, in forward order. */
  ranForward(group: FSDPParamGroup): void;
  /** The group whose backward comes after `group`'s (the one to prefetch). */
  nextInBackward(group: FSDPParamGroup): FSDPParamGroup | undefined;
  /** The group whose forward came after `group`'s in the last step (the one to prefetch). */
  nextInForward(group: FSDPParamGroup): FSDPParamGroup | undefined;
  /** Adds to the step's communication counters. */
  count(what: CommCounter, n: number): void;
}

/** The parameters of one `fullyShard` call and their communication. */
export class FSDPParamGroup {
  /** Whether the full parameters exist. */
  state = ShardedState.Sharded;
  /** Where the group is in the step. */
  training = TrainingState.Idle;
  /** The root of the FSDP tree this group belongs to (reassigned when a parent is sharded). */
  root: StepRecorder;
  /** The all-gather in flight: awaited in backward, started on a native thread in forward. */
  #gather: { out: Tensor; work: Work | BlockingWork } | null = null;
  /** The reduction of the gradients in flight. */
  #reduce: Reduction | null = null;
  /** Full gradients summed since the last reduce-scatter (size × S; noSync accumulates here). */
  #pending: Tensor | null = null;
  #ready = new Set<FSDPParam>();
  readonly #trainable: number;
  /** Counts on the root as it is at the time (it changes when a parent is sharded). */
  readonly #count = (what: CommCounter, n: number) => this.root.count(what, n);

  /**
   * @param params The group's parameters, with offsets into `flat`.
   * @param flat This rank's shards, S elements (see [Note: flat layouts] in _collectives.ts).
   * @param group The process group the parameters are sharded over.
   * @param replicate HSDP's group of the replicas of this rank's shards (the mesh's dim 0), whose
   * reduced gradients are averaged (see [Note: replicate all-reduce order]); null without.
   * @param reshardAfterForward Whether to free the full parameters after forward.
   * @param forwardPrefetch Whether forward may start the group's all-gather ahead.
   * @param root The root's recorder.
   * @param policy The mixed-precision policy (see [Note: mixed precision]).
   */
  constructor(
    readonly params: readonly FSDPParam[],
    readonly flat: Tensor,
    readonly group: ProcessGroup,
    readonly replicate: ProcessGroup | null,
    readonly reshardAfterForward: boolean,
    readonly forwardPrefetch: boolean,
    root: StepRecorder,
    readonly policy: ResolvedPolicy,
  ) {
    this.root = root;
    const trainable = params.filter((p) => p.unsharded.requiresGrad);
    this.#trainable = trainable.length;
    for (const p of trainable) {
      p.unsharded.registerPostAccumulateGradHook(() => this.#onGradReady(p));
    }
  }

  /** Elements of this rank's flat shard. */
  get S(): number {
    return this.flat.numel();
  }

  /**
   * Gathers the full parameters on the calling thread (forward cannot await): waits for the
   * prefetched all-gather if one is in flight, else runs a blocking one.
   */
  unshardBlocking(): void {
    if (this.state === ShardedState.Unsharded) return;
    const started = this.#gather;
    if (this.state === ShardedState.Gathering && !(started?.work instanceof BlockingWork)) {
      throw new Error("FSDP: a blocking unshard while the group's all-gather is in flight");
    }
    this.#gather = null;
    const gathered = started ??
      this.#allGather((out, input) => this.group.allGatherBlocking(out, input));
    if (gathered !== null) {
      try {
        if (started !== null) (started.work as BlockingWork).waitBlocking();
        copyOut(gathered.out, this.params, this.group.size, this.S);
      } catch (err) {
        this.state = ShardedState.Sharded;
        throw err;
      } finally {
        gathered.out.dispose();
      }
    }
    this.#exposeUnsharded();
  }

  /**
   * Forward prefetch: starts the all-gather on a native thread, to run while the group before
   * this one computes, when the group is sharded, allows it, and its process group can start one.
   */
  prefetchForward(): void {
    if (!this.forwardPrefetch || this.state !== ShardedState.Sharded) return;
    if (!this.group.canStartAllGather) return;
    this.#gather = this.#allGather((out, input) => this.group.allGatherStart(out, input));
    if (this.#gather === null) return this.#exposeUnsharded();
    this.state = ShardedState.Gathering;
    this.root.count("forwardPrefetches", 1);
  }

  /** Waits for a forward prefetch that nothing used and frees what it gathered. */
  dropPrefetch(): void {
    if (!(this.#gather?.work instanceof BlockingWork)) return;
    this.unshardBlocking();
    this.reshard();
  }

  /** Issues the all-gather of the full parameters, unless they exist or are on their way. */
  unshard(): void {
    if (this.state !== ShardedState.Sharded) return;
    this.#gather = this.#allGather((out, input) => this.group.allGather(out, input));
    if (this.#gather === null) return this.#exposeUnsharded();
    this.state = ShardedState.Gathering;
  }

  /** Waits for the all-gather that `unshard` issued and copies the full parameters out. */
  async waitForUnshard(): Promise<void> {
    if (this.#gather === null) return;
    const { out, work } = this.#gather;
    this.#gather = null;
    try {
      const start = performance.now();
      if (work instanceof BlockingWork) work.waitBlocking();
      else await work;
      this.root.count("exposedCommMs", performance.now() - start);
      copyOut(out, this.params, this.group.size, this.S);
    } catch (err) {
      this.state = ShardedState.Sharded;
      throw err;
    } finally {
      out.dispose();
    }
    this.#exposeUnsharded();
  }

  /** Frees the full parameters; the module's attributes hold the shards again. */
  reshard(): void {
    if (this.state !== ShardedState.Unsharded) return;
    for (const p of this.params) {
      p.freeUnsharded();
      p.expose(false);
    }
    this.state = ShardedState.Sharded;
  }

  /** Whether forward runs again in backward, in a checkpointed region's recompute (gathered). */
  get recomputing(): boolean {
    return this.root.inBackward && this.training === TrainingState.PreBackward;
  }

  /** Before the module's forward: gather the full parameters, then prefetch the next group's. */
  preForward(): void {
    // A recompute's preparation gathered them (see [Note: recompute preparations] in
    // src/nn/utils/checkpoint.ts); FSDP2's pre-forward in its pre-backward state does nothing too.
    if (this.recomputing) return;
    // An evaluation forward (no graph) has no backward to prepare for.
    if (isGradEnabled()) this.root.ranForward(this);
    this.training = TrainingState.Forward;
    const start = performance.now();
    this.unshardBlocking();
    this.root.nextInForward(this)?.prefetchForward();
    this.root.count("forwardCommMs", performance.now() - start);
  }

  /**
   * After the module's forward: hook the outputs for backward, and reshard if asked to. The root's
   * own group stays unsharded, as in FSDP2: backward needs it first, so resharding it would only
   * gather it again at once.
   */
  postForward<T>(output: T): T {
    // A recompute's outputs need no hook, and its parameters stay for the recomputed backward.
    if (this.recomputing) return output;
    const grad = isGradEnabled();
    const hooked = grad ? this.#hookOutputs(output) : output;
    const reshard = grad
      ? this.reshardAfterForward && this.root.group !== this
      : !this.root.keepsGathered;
    if (reshard) this.reshard();
    this.training = TrainingState.Idle;
    return hooked as T;
  }

  /**
   * Backward reached the group's outputs: gather the full parameters again (and prefetch the
   * next group's); the returned promise is awaited before the group's nodes run.
   */
  preBackward(): Promise<void> | void {
    if (!this.root.inBackward) {
      throw new Error(
        "FSDP: loss.backward() ran on a loss computed through a fully sharded module; its " +
          "parameters must be gathered and its gradients reduced, which needs " +
          "`await model.backward(loss)` on the root module",
      );
    }
    if (this.training === TrainingState.PreBackward) return;
    this.training = TrainingState.PreBackward;
    this.unshard();
    const next = this.root.nextInBackward(this);
    if (next?.reshardAfterForward) next.unshard();
    if (this.state === ShardedState.Gathering) return this.waitForUnshard();
  }

  /**
   * Every gradient is in (or backward ended): add the full gradients into the pending sum, free
   * the full parameters and, when synchronising, issue the reduce-scatter.
   */
  postBackward(): void {
    if (this.training === TrainingState.PostBackward) return;
    this.training = TrainingState.PostBackward;
    this.#ready.clear();
    const size = this.group.size;
    this.#pending ??= Object.assign(Tensor.empty([size * this.S], "f32", true, this.flat.device), {
      persistent: true,
    });
    copyIn(this.#pending, this.params, size, this.S);
    this.reshard();
    if (!this.root.sync || this.S === 0) return;
    const pending = this.#pending;
    this.#pending = null;
    this.#reduce = reduceGradients(
      pending,
      this.group,
      this.replicate,
      this.policy.reduceDtype,
      this.#count,
    );
  }

  /** Waits for an issued reduce-scatter (or an unconsumed prefetch) and sets the shards' grads. */
  async finishBackward(): Promise<void> {
    if (this.#gather !== null) {
      // Prefetched for a backward that never reached the group: gathered for nothing, but the
      // next forward must gather the updated shards again, not reuse these.
      await this.waitForUnshard();
      this.reshard();
    }
    const reduce = this.#reduce;
    this.#reduce = null;
    this.training = TrainingState.Idle;
    if (reduce !== null) await takeReduction(reduce, this.params);
  }

  #onGradReady(p: FSDPParam): void {
    if (!this.root.inBackward) this.preBackward();
    this.#ready.add(p);
    if (this.#ready.size === this.#trainable) this.postBackward();
  }

  /** Issues the all-gather of the group's shards with `issue` (see `allGatherShards`). */
  #allGather<W>(issue: (out: Tensor, input: Tensor) => W): { out: Tensor; work: W } | null {
    return allGatherShards(this.flat, this.group, this.policy.paramDtype, this.#count, issue);
  }

  #exposeUnsharded(): void {
    for (const p of this.params) p.expose(true);
    this.state = ShardedState.Unsharded;
  }

  /** Puts an identity node with the pre-backward hook over every tensor in `output`. */
  #hookOutputs(output: unknown): unknown {
    if (output instanceof Tensor) {
      if (!output.requiresGrad) return output;
      const y = record(viewOf(output), "FSDPPreBackward", [output], (g) => [viewOf(g)], [], []);
      y.gradFn!.preBackward = () => this.preBackward();
      // Inside a checkpointed region the node is dropped; its work runs before the recompute.
      setRecomputePreparation(y.gradFn!, () => this.preBackward());
      return y;
    }
    if (Array.isArray(output)) return output.map((o) => this.#hookOutputs(o));
    // A plain record of outputs, as GPT's `{ logits, loss }` (PyTorch's tree map takes dicts too).
    if (
      output !== null && typeof output === "object" &&
      Object.getPrototypeOf(output) === Object.prototype
    ) {
      return Object.fromEntries(Object.entries(output).map(([k, o]) => [k, this.#hookOutputs(o)]));
    }
    return output;
  }
}

/** A new tensor over the same memory (the identity's output and its gradient). */
function viewOf(t: Tensor): Tensor {
  return new Tensor(t.storage, t.shape, t.dtype, t.strides, t.offset);
}
