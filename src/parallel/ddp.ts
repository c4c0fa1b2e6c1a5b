/**
 * DistributedDataParallel: data-parallel training over a process group, after PyTorch's DDP.
 *
 * Construction, in named steps like torch/nn/parallel/distributed.py: collect the parameters that
 * require gradients, verify that every rank has the same names and shapes, broadcast rank 0's
 * parameters and buffers, assign gradient buckets, register gradient-ready hooks.
 *
 * [Note: overlapped bucketed all-reduce]
 * During backward, each parameter's post-accumulate-grad hook (see [Note: gradient-ready hooks]
 * in src/tensor/autograd.ts) moves its gradient into its bucket and makes `param.grad` a view of
 * the bucket memory, so later accumulation (noSync) writes there directly. When a bucket and every
 * bucket before it are complete, its all-reduce (op "avg") is issued at once and runs on a native
 * thread while backward goes on: every bucket over a backend with its own issue queue (shared
 * memory), the first bucket otherwise (Gloo; the others start when backward has returned). Over
 * shared memory the last bucket, complete only as backward ends, is reduced on this thread once
 * backward returns (see `#issueReadyBuckets`). Buckets are issued in index order on every rank, so
 * the collective sequence is identical everywhere. The memory of cpu buckets comes from
 * `emptyShared`: over shared memory every rank maps every rank's buckets, and an all-reduce
 * reduces them where they lie, with no staging copy. `await ddp.backward(loss)` returns when every
 * bucket is reduced and the averaged gradients are in `param.grad`.
 *
 * Parameters that get no gradient in a step: see [Note: unused parameters] in _unused.ts.
 *
 * [Note: plain loss.backward() under DDP]
 * `loss.backward()` is synchronous and an all-reduce is not, so a plain backward cannot average
 * the gradients before it returns. Left alone it would issue the buckets' all-reduces, never
 * await them and never reset the iteration, leaving `.grad` local and making the next, correct
 * step skip synchronisation. So the first gradient hook that fires outside `ddp.backward` (and
 * outside `noSync`) throws at once, before any collective is issued on this rank and with DDP's
 * state untouched: the error says to use `await ddp.backward(loss)`, and after `zeroGrad()` the
 * following steps are exact. Inside `noSync`, where nothing is reduced, a plain backward is fine.
 * @module
 */

import { broadcast, getWorldSize, worldGroup } from "../distributed/mod.ts";
import type { ProcessGroup, Work } from "../distributed/mod.ts";
import { Module } from "../nn/module.ts";
import { nowUs, record, tagNext } from "../profile/tracer.ts";
import { callerScope } from "../distributed/ledger.ts";
import { diagnosedOnFailure } from "../distributed/_pending_diagnosis.ts";
import type { Tensor } from "../tensor/tensor.ts";
import {
  adoptBucketView,
  assignBuckets,
  type Bucket,
  bucketMemory,
  type BucketSlot,
} from "./_buckets.ts";
import { adoptUnused, dropGloballyUnused, reduceUsedMask } from "./_unused.ts";
import { verifyParamsAcrossRanks } from "./_verify.ts";
import { blockingWork, compressedAllReduce, withParamsCast } from "./_ddp_precision.ts";
import type { DDPOptions, DDPStats } from "./ddp_options.ts";
import { castFloatInputs, type ResolvedPolicy, resolveMixedPrecision } from "./mixed_precision.ts";

/**
 * Wraps a module for data-parallel training. Create it with {@linkcode DistributedDataParallel.create}
 * on every rank, call `forward` as usual, and `await ddp.backward(loss)` instead of `loss.backward()`.
 *
 * @example One DDP step
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, F, nn, noGrad, optim, parallel, randn, tensor } from "../../mod.ts";
 * // In a process started by the launcher: `await dist.initProcessGroup({ backend: "gloo" })`.
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const ddp = await parallel.DistributedDataParallel.create(new nn.MLP([784, 512, 10]));
 * const opt = new optim.SGD(ddp.parameters(), { lr: 0.1 });
 * const x = randn([4, 784]), y = tensor([0, 3, 7, 9], [4], { dtype: "i32" });
 * const loss = F.crossEntropy(ddp.forward(x), y);
 * await ddp.backward(loss); // every parameter's grad is the average over ranks
 * assert.ok(ddp.parameters().every((p) => p.grad !== null));
 * opt.step();
 * assert.ok(noGrad(() => F.crossEntropy(ddp.forward(x), y)).item() < loss.item());
 * await dist.destroyProcessGroup();
 * ```
 */
export class DistributedDataParallel<M extends Module = Module> extends Module {
  /** The wrapped module (its state dict has no "module." prefix). */
  readonly module: M;
  /** Statistics of the last synchronised backward. */
  lastStats: DDPStats = {
    backwardMs: 0,
    exposedCommMs: 0,
    commSpanMs: 0,
    buckets: 0,
    allReduceBytes: 0,
  };
  readonly #group: ProcessGroup;
  readonly #options: Required<Omit<DDPOptions, "processGroup" | "mixedPrecision">>;
  readonly #buckets: Bucket[];
  readonly #slotOf = new Map<Tensor, { bucket: Bucket; slot: BucketSlot }>();
  #ready: Set<Tensor>[] = [];
  /** Parameters whose hook fired since the last synchronised backward, noSync passes included. */
  #usedSinceSync = new Set<Tensor>();
  #works: (Work | undefined)[] = [];
  #allReduceBytes = 0;
  readonly #policy: ResolvedPolicy;
  #nextToIssue = 0;
  #firstIssue = 0;
  #sync = true;
  #inBackward = false;
  /** Whether `loss.backward()` has returned in the current synchronised backward. */
  #backwardReturned = false;

  private constructor(
    module: M,
    group: ProcessGroup,
    options: Required<Omit<DDPOptions, "processGroup" | "mixedPrecision">>,
    buckets: Bucket[],
    policy: ResolvedPolicy,
  ) {
    super();
    this.#policy = policy;
    this.module = module;
    this.#group = group;
    this.#options = options;
    this.#buckets = buckets;
    for (const bucket of this.#buckets) {
      for (const slot of bucket.slots) {
        this.#slotOf.set(slot.param, { bucket, slot });
        slot.param.registerPostAccumulateGradHook((p) => this.#onGradReady(p));
      }
    }
    this.#resetIteration();
  }

  /**
   * Wraps `module` on this rank: verifies parameters across ranks, broadcasts rank 0's state and
   * registers the gradient hooks. Every rank must call it with an equal module.
   */
  static async create<M extends Module>(
    module: M,
    options: DDPOptions = {},
  ): Promise<DistributedDataParallel<M>> {
    const group = options.processGroup ?? worldGroup("DistributedDataParallel");
    const resolved = {
      bucketCapMb: options.bucketCapMb ?? 25,
      firstBucketMb: options.firstBucketMb ?? 1,
      findUnusedParameters: options.findUnusedParameters ?? false,
      broadcastBuffers: options.broadcastBuffers ?? true,
    };
    for (const key of ["bucketCapMb", "firstBucketMb"] as const) {
      if (!(resolved[key] > 0)) {
        throw new RangeError(
          `DistributedDataParallel: ${key} must be positive, got ${resolved[key]}`,
        );
      }
    }
    const policy = resolveMixedPrecision(
      "DistributedDataParallel",
      options.mixedPrecision,
      "mixedPrecision",
      "f32",
    );
    const named = [...module.namedParameters()];
    if (!named.some(([, p]) => p.requiresGrad)) {
      throw new Error(
        "DistributedDataParallel: the module has no parameter that requires a gradient",
      );
    }
    await verifyParamsAcrossRanks(named, group);
    await broadcastFromFirst([...module.parameters(), ...module.buffers()], group);
    const buckets = await assignBuckets(
      named.filter(([, p]) => p.requiresGrad).map(([name, param]) => ({ name, param })),
      resolved.firstBucketMb * 2 ** 20,
      resolved.bucketCapMb * 2 ** 20,
      bucketMemory(group),
    );
    return new DistributedDataParallel(module, group, resolved, buckets, policy);
  }

  /**
   * Runs the wrapped module's forward, with its arguments and result types; under a `paramDtype`
   * policy on copies of the parameters in that dtype, its floating-point inputs cast too.
   */
  forward(...inputs: Parameters<M["forward"]>): ReturnType<M["forward"]> {
    const { paramDtype, castForwardInputs } = this.#policy;
    if (paramDtype === "f32") return this.module.forward(...inputs);
    const args = castForwardInputs ? inputs.map((x) => castFloatInputs(x, paramDtype)) : inputs;
    return withParamsCast(this.module, paramDtype, () => this.module.forward(...args));
  }

  /** The process group's world size. */
  get worldSize(): number {
    return getWorldSize(this.#group);
  }

  /**
   * Runs `loss.backward()` and, unless inside `noSync`, waits until every gradient bucket has been
   * averaged across ranks.
   */
  backward(loss: Tensor): Promise<void> {
    // One capture of the user's line for every bucket (see [Note: call sites at the cost of a
    // capture] in src/distributed/ledger.ts).
    // A blocking collective inside the backward (tensor parallelism) is diagnosed on failure.
    return diagnosedOnFailure(callerScope(() => this.#backward(loss)));
  }

  async #backward(loss: Tensor): Promise<void> {
    if (this.#inBackward) {
      throw new Error("DistributedDataParallel.backward: a backward is already in progress");
    }
    this.#inBackward = true;
    try {
      const start = performance.now();
      const startUs = nowUs();
      loss.backward();
      this.#backwardReturned = true;
      const backwardEnd = performance.now();
      record("backward", "compute", startUs, nowUs());
      if (!this.#sync) return;
      // From here on the step waits for communication (the last bucket may be reduced on this
      // thread, inside #issueReadyBuckets).
      const waitUs = nowUs();
      const gradless = adoptUnused(this.#buckets, this.#ready, this.#options.findUnusedParameters);
      this.#issueReadyBuckets();
      const used = this.#options.findUnusedParameters
        ? reduceUsedMask(this.#params(), this.#usedSinceSync, this.#group)
        : null;
      const works = [...this.#works, ...(used ? [used.work] : [])];
      const results = await Promise.allSettled(works.map((w) => w!.wait()));
      const end = performance.now();
      record("wait for buckets", "wait", waitUs, nowUs());
      this.lastStats = {
        backwardMs: backwardEnd - start,
        // From backward's end, or from the first issue when every bucket waited for backward
        // to return (one bucket, reduced on this thread).
        exposedCommMs: end - Math.max(backwardEnd, this.#firstIssue),
        commSpanMs: end - this.#firstIssue,
        buckets: this.#buckets.length,
        allReduceBytes: this.#allReduceBytes,
      };
      const failure = results.find((r) => r.status === "rejected");
      const usedCounts = used && !failure ? used.mask.toArray() : null;
      used?.mask.dispose();
      if (failure) throw (failure as PromiseRejectedResult).reason;
      if (usedCounts) dropGloballyUnused(this.#params(), usedCounts, gradless);
      if (this.#options.broadcastBuffers) {
        await broadcastFromFirst(this.module.buffers(), this.#group);
      }
    } finally {
      this.#inBackward = false;
      if (this.#sync) {
        this.#resetIteration();
        this.#usedSinceSync.clear();
      }
    }
  }

  /**
   * Whether the next backward all-reduces the gradients (PyTorch's `require_backward_grad_sync`,
   * default true). While false, backward passes only accumulate local gradients; the first
   * backward after it is set back to true reduces the accumulated sum. It is read when a backward
   * runs (PyTorch reads it in forward; set before forward, as nanoGPT does, it means the same in
   * both), so it cannot change while `ddp.backward` runs. {@linkcode noSync} is the scoped form.
   *
   * @example Gradient accumulation as nanoGPT's train.py does it
   * ```ts
   * import assert from "node:assert/strict";
   * import { dist, F, nn, parallel, randn, tensor } from "../../mod.ts";
   * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
   * const ddp = await parallel.DistributedDataParallel.create(new nn.MLP([8, 4]));
   * const gradAccumSteps = 4;
   * for (let microStep = 0; microStep < gradAccumSteps; microStep++) {
   *   // Only the last micro-step's backward all-reduces (the sum of all four).
   *   ddp.requireBackwardGradSync = microStep === gradAccumSteps - 1;
   *   const x = randn([2, 8]), y = tensor([1, 3], [2], { dtype: "i32" });
   *   await ddp.backward(F.crossEntropy(ddp.forward(x), y).div(gradAccumSteps));
   * }
   * assert.ok(ddp.parameters().every((p) => p.grad !== null));
   * await dist.destroyProcessGroup();
   * ```
   */
  get requireBackwardGradSync(): boolean {
    return this.#sync;
  }

  set requireBackwardGradSync(value: boolean) {
    if (typeof value !== "boolean") {
      throw new TypeError(
        `DistributedDataParallel.requireBackwardGradSync must be a boolean, got ${typeof value}`,
      );
    }
    if (this.#inBackward) {
      throw new Error(
        "DistributedDataParallel.requireBackwardGradSync cannot change while ddp.backward is " +
          "running (await it first)",
      );
    }
    this.#sync = value;
    // Bucket readiness is tracked only for synchronised passes: start the next one afresh.
    this.#resetIteration();
  }

  /**
   * Runs `fn` (which may be async) with gradient synchronisation off: backward passes only
   * accumulate local gradients, for gradient accumulation. The next synchronised backward reduces
   * the accumulated sum. The same as setting {@linkcode requireBackwardGradSync} to false for the
   * duration of `fn` and back to its previous value after.
   */
  async noSync<R>(fn: () => R | Promise<R>): Promise<R> {
    const previous = this.requireBackwardGradSync;
    this.requireBackwardGradSync = false;
    try {
      return await fn();
    } finally {
      this.requireBackwardGradSync = previous;
    }
  }

  #resetIteration(): void {
    this.#backwardReturned = false;
    this.#ready = this.#buckets.map(() => new Set());
    this.#works = this.#buckets.map(() => undefined);
    this.#nextToIssue = 0;
    this.#allReduceBytes = 0;
  }

  /**
   * The gradient-ready hook: move the gradient into its bucket, then issue what is complete.
   * Throws when a plain `loss.backward()` runs (see [Note: plain loss.backward() under DDP]).
   */
  #onGradReady(param: Tensor): void {
    if (this.#sync && !this.#inBackward) {
      throw new Error(
        "DistributedDataParallel: loss.backward() ran on a loss computed through the wrapped " +
          `model (gradient of ${this.#slotOf.get(param)!.slot.name}), outside ddp.backward: ` +
          "the gradients would not be averaged across ranks. Use `await ddp.backward(loss)` " +
          "instead, and call zeroGrad() before the next step (inside ddp.noSync(...), or with " +
          "ddp.requireBackwardGradSync = false, a plain backward is fine: it only accumulates " +
          "local gradients).",
      );
    }
    const entry = this.#slotOf.get(param)!;
    adoptBucketView(entry.slot);
    this.#usedSinceSync.add(param);
    if (!this.#sync) return;
    this.#ready[entry.bucket.index].add(param);
    this.#issueReadyBuckets();
  }

  /**
   * Issues buckets in index order while the next one is complete. Where the group can all-reduce
   * on this thread (shared memory), the last bucket waits for backward to return and is reduced
   * here, blocking: it is complete only as backward ends, nothing is left to overlap it with, and
   * a native thread would have to wake for it and then wake this one (see BENCHMARKS.md).
   */
  #issueReadyBuckets(): void {
    while (
      this.#nextToIssue < this.#buckets.length &&
      this.#ready[this.#nextToIssue].size === this.#buckets[this.#nextToIssue].slots.length
    ) {
      const bucket = this.#buckets[this.#nextToIssue];
      const here = bucket.index === this.#buckets.length - 1 &&
        this.#group.canAllReduceBlocking;
      if (here && !this.#backwardReturned) return;
      if (this.#nextToIssue === 0) this.#firstIssue = performance.now();
      tagNext({ bucket: bucket.index });
      this.#nextToIssue++;
      const { reduceDtype } = this.#policy;
      if (reduceDtype === "f32") {
        this.#works[bucket.index] = here
          ? blockingWork(() => this.#group.allReduceBlocking(bucket.buffer, "avg"))
          : this.#group.allReduce(bucket.buffer, "avg");
        this.#allReduceBytes += bucket.buffer.numel() * 4;
      } else {
        const { work, bytes } = compressedAllReduce(this.#group, bucket.buffer, reduceDtype, here);
        this.#works[bucket.index] = work;
        this.#allReduceBytes += bytes;
      }
    }
  }

  /** The parameters in bucket order, the order of the used mask. */
  #params(): Tensor[] {
    return this.#buckets.flatMap((b) => b.slots.map((s) => s.param));
  }
}

/** Copies the group's first rank's `tensors` to every rank (parameters at creation, buffers after steps). */
async function broadcastFromFirst(tensors: Tensor[], group: ProcessGroup): Promise<void> {
  await Promise.all(tensors.map((t) => broadcast(t, group.ranks[0], group).wait()));
}
