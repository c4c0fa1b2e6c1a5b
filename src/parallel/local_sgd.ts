/**
 * LocalSGD (Lin et al., "Don't Use Large Mini-Batches, Use Local SGD"): every replica steps its
 * own optimizer on its own data, and every `syncEvery` steps the replicas average their
 * parameters. PyTorch's `PeriodicModelAverager` and torchft's `LocalSGD`.
 * @module
 */

import type { ProcessGroup } from "../distributed/mod.ts";
import type { Module } from "../nn/module.ts";
import type { Parameter } from "../nn/parameter.ts";
import { noGrad } from "../tensor/grad_mode.ts";
import { tidyAsync } from "../tensor/scope.ts";
import {
  broadcastFromFirst,
  checkSyncEvery,
  flatF32,
  replicaGroup,
  trainableParameters,
  unflatten,
} from "./_replicas.ts";

/** Options of {@linkcode LocalSGD}. */
export interface LocalSGDOptions {
  /** Optimizer steps between two averages (torchft's `sync_every`, PyTorch's `period`). */
  syncEvery: number;
  /** The replicas (default: the world); on a 2-D mesh, the replicate dimension's group. */
  group?: ProcessGroup;
}

/**
 * Averages a model's parameters over the replica group every `syncEvery` optimizer steps; between
 * averages the replicas do not communicate. Each sync is one all-reduce ("avg") of every
 * parameter end to end in f32 (a bf16 parameter rounds its average back). Buffers and optimizer
 * state stay local, as in PyTorch.
 *
 * torchft's `LocalSGD` hooks `optimizer.step()`; dtrain's `step()` is synchronous and a collective
 * is awaited, so here the training loop awaits `localSgd.step()` after each `optimizer.step()`,
 * as with PyTorch's `PeriodicModelAverager.average_parameters`.
 *
 * @example Average every 4 steps
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, nn, ones, optim, parallel } from "../../mod.ts";
 * // A world of one process; under the launcher every rank runs the same lines.
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const model = new nn.Linear(4, 2);
 * const optimizer = new optim.SGD(model.parameters(), { lr: 0.1 });
 * const localSgd = await parallel.LocalSGD.create(model, { syncEvery: 4 });
 * const synced: boolean[] = [];
 * for (let step = 0; step < 8; step++) {
 *   optimizer.zeroGrad();
 *   model.forward(ones([1, 4])).sum().backward();
 *   optimizer.step();
 *   synced.push(await localSgd.step());
 * }
 * assert.deepEqual(synced, [false, false, false, true, false, false, false, true]);
 * await dist.destroyProcessGroup();
 * ```
 */
export class LocalSGD {
  /** The model whose parameters are averaged. */
  readonly model: Module;
  /** Optimizer steps between two averages. */
  readonly syncEvery: number;
  readonly #group: ProcessGroup;
  readonly #params: Parameter[];
  #localStep = 0;

  private constructor(model: Module, syncEvery: number, group: ProcessGroup, params: Parameter[]) {
    this.model = model;
    this.syncEvery = syncEvery;
    this.#group = group;
    this.#params = params;
  }

  /**
   * Starts LocalSGD on this replica: copies the group's first rank's parameters to every rank, so
   * that the replicas start equal. Every rank of the group calls it with an equal model.
   *
   * @param model The model (the trainable parameters are averaged).
   * @param options See {@linkcode LocalSGDOptions}.
   * @returns The averager.
   * @throws RangeError when `syncEvery` is not an integer of at least 1.
   */
  static async create(model: Module, options: LocalSGDOptions): Promise<LocalSGD> {
    checkSyncEvery(options.syncEvery, "LocalSGD");
    const group = replicaGroup(options.group, "LocalSGD");
    const params = trainableParameters(model, "LocalSGD").map(([, p]) => p);
    await broadcastFromFirst(params, group);
    return new LocalSGD(model, options.syncEvery, group, params);
  }

  /** Optimizer steps taken since the last average. */
  get localStep(): number {
    return this.#localStep;
  }

  /**
   * Counts one optimizer step, and averages the parameters when it is the `syncEvery`-th since the
   * last average. Call it after every `optimizer.step()`, on every replica.
   *
   * @returns Whether this step averaged.
   */
  async step(): Promise<boolean> {
    this.#localStep++;
    if (this.#localStep < this.syncEvery) return false;
    await this.sync();
    return true;
  }

  /** Averages the parameters over the group now (every replica at once) and restarts the count. */
  async sync(): Promise<void> {
    await tidyAsync(async () => {
      const flat = flatF32(this.#params);
      await this.#group.allReduce(flat, "avg").wait();
      const averaged = unflatten(flat, this.#params);
      noGrad(() => this.#params.forEach((p, i) => p.copy_(averaged[i])));
    });
    this.#localStep = 0;
  }
}
