/**
 * DiLoCo (Douillard et al., "DiLoCo: Distributed Low-Communication Training of Language Models"):
 * replicas take `syncEvery` inner steps alone, then average their pseudo-gradients and take one
 * outer step together. torchft's `DiLoCo` with one fragment.
 * @module
 */

import { ProcessGroup } from "../distributed/process_group.ts";
import type { Module } from "../nn/module.ts";
import type { Parameter } from "../nn/parameter.ts";
import type { Optimizer, OptimizerStateDict } from "../optim/optimizer.ts";
import { zeroGradients } from "../optim/optimizer.ts";
import { SGD } from "../optim/sgd.ts";
import { noGrad } from "../tensor/grad_mode.ts";
import { tidyAsync } from "../tensor/scope.ts";
import { formatShape, sameShape, type Tensor } from "../tensor/tensor.ts";
import * as compression from "./_compression.ts";
import type { Manager } from "./ft/manager.ts";
import {
  broadcastFromFirst,
  checkSyncEvery,
  flatF32,
  replicaGroup,
  trainableParameters,
  unflatten,
} from "./_replicas.ts";

/**
 * The type a pseudo-gradient travels in: "f32", "bf16" (half the bytes) or "int8" (a quarter, with
 * one f32 scale per parameter).
 */
export type PseudoGradientDtype = compression.PseudoGradientDtype;

/** Options of {@linkcode DiLoCo}. */
export interface DiLoCoOptions {
  /** Inner steps per outer step, the paper's H (torchft's `sync_every`). */
  syncEvery: number;
  /**
   * The outer optimizer, over the model's parameters (default: the paper's
   * `new optim.SGD(model.parameters(), { lr: 0.7, momentum: 0.9, nesterov: true })`).
   */
  outerOptimizer?: Optimizer<{ lr: number }>;
  /** The replicas (default: the world); on a 2-D mesh, the replicate dimension's group. */
  group?: ProcessGroup;
  /**
   * Fault-tolerant replicas instead of `group`: every sync averages over the manager's quorum and
   * commits only if every member finished it (else the period's inner steps are dropped and θ
   * stays); a quorum is formed at `create` and after every sync, so a replica that joins heals
   * (DiLoCo's state is registered as "diloco") and starts the next period with the others.
   * Register the model's and the inner optimizer's state with the manager before `create`.
   */
  manager?: Manager;
  /**
   * The type the pseudo-gradients travel in (default "f32"): "bf16" halves the bytes, "int8"
   * quarters them (one f32 scale per parameter, max|x|/127).
   */
  pseudoGradientDtype?: PseudoGradientDtype;
  /**
   * Whether what a replica's pseudo-gradient lost to bf16 or int8 rounding is added to its next
   * pseudo-gradient, so that no update is lost for good (default: true when compressed; f32 loses
   * nothing and refuses it).
   */
  errorFeedback?: boolean;
}

/** What the last outer step cost. */
export interface DiLoCoSyncStats {
  /** The bytes this replica sent. */
  bytes: number;
  /** Milliseconds from the start of the sync to the end of the outer step. */
  ms: number;
}

/** DiLoCo's own state, to save beside the model and the inner optimizer (names as the model's). */
export interface DiLoCoStateDict {
  /** Inner steps taken since the last outer step. */
  localStep: number;
  /** The weights at the last outer step (shared, not copied). */
  original: Record<string, Tensor>;
  /** Error feedback's residual per parameter, f32 (empty without error feedback). */
  residual: Record<string, Tensor>;
  /** The outer optimizer's state dict (Nesterov's momentum buffers). */
  outerOptimizer: OptimizerStateDict<{ lr: number }>;
}

/**
 * [Note: DiLoCo's outer step]
 * Every replica keeps the weights of the last outer step, θ. After H inner steps it holds θᵢ and
 * its pseudo-gradient is Δᵢ = θ − θᵢ (with error feedback, plus the residual eᵢ that its last
 * compressed Δ lost). The replicas average Δ = mean(Δᵢ) over the group; every replica then puts θ
 * back into the model, sets each parameter's `.grad` to its part of Δ and steps the outer
 * optimizer, so that with the default (SGD, Nesterov): b ← μb + Δ (b = Δ on the first outer step),
 * θ ← θ − lr·(Δ + μb). The result is the model's weights and the new θ on every replica.
 */

/**
 * DiLoCo on one replica: `step()` takes an inner step and, every `syncEvery` of them, the outer
 * step of [Note: DiLoCo's outer step]: one collective of the whole pseudo-gradient per sync,
 * instead of one per inner step. Use it when the replicas are linked by a slow network (Ethernet
 * between machines); inside a replica, DDP or FSDP over a fast link still shares each step's work.
 *
 * torchft's `DiLoCo` hooks `inner_optimizer.step()`; dtrain's `step()` is synchronous and the
 * collective is awaited, so here the loop awaits `diloco.step()` in its place, which runs the inner
 * optimizer's step itself. After an outer step the parameters have no gradient (`.grad` is null),
 * as after torchft's `outer_optimizer.zero_grad()`. Buffers and the inner optimizer's state stay
 * local, as in the paper.
 *
 * @example Two replicas' worth of the API on one process
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, nn, ones, optim, parallel } from "../../mod.ts";
 * // A world of one process; under the launcher every rank runs the same lines.
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const model = new nn.Linear(4, 2);
 * const inner = new optim.AdamW(model.parameters(), { lr: 1e-3 });
 * const diloco = await parallel.DiLoCo.create(model, inner, { syncEvery: 2 });
 * const synced: boolean[] = [];
 * for (let step = 0; step < 4; step++) {
 *   inner.zeroGrad();
 *   model.forward(ones([1, 4])).sum().backward();
 *   synced.push(await diloco.step()); // inner.step(), then the outer step every 2nd time
 * }
 * assert.deepEqual(synced, [false, true, false, true]);
 * assert.equal(diloco.stateDict().localStep, 0);
 * diloco.dispose();
 * await dist.destroyProcessGroup();
 * ```
 */
export class DiLoCo {
  /** The model trained. */
  readonly model: Module;
  /** The optimizer of every step. */
  readonly innerOptimizer: Optimizer<{ lr: number }>;
  /** The optimizer of the outer steps. */
  readonly outerOptimizer: Optimizer<{ lr: number }>;
  /** Inner steps per outer step. */
  readonly syncEvery: number;
  /** The type pseudo-gradients travel in. */
  readonly pseudoGradientDtype: PseudoGradientDtype;
  /** What the last outer step cost (null before the first). */
  lastSync: DiLoCoSyncStats | null = null;
  readonly #group: ProcessGroup | null;
  readonly #manager: Manager | null;
  readonly #named: [string, Parameter][];
  readonly #params: Parameter[];
  readonly #original: Tensor[];
  readonly #residual: Tensor[] | null;
  #localStep = 0;

  private constructor(
    model: Module,
    innerOptimizer: Optimizer<{ lr: number }>,
    outerOptimizer: Optimizer<{ lr: number }>,
    options: Required<Pick<DiLoCoOptions, "syncEvery" | "pseudoGradientDtype" | "errorFeedback">>,
    group: ProcessGroup | Manager,
    named: [string, Parameter][],
  ) {
    this.model = model;
    this.innerOptimizer = innerOptimizer;
    this.outerOptimizer = outerOptimizer;
    this.syncEvery = options.syncEvery;
    this.pseudoGradientDtype = options.pseudoGradientDtype;
    [this.#group, this.#manager] = group instanceof ProcessGroup ? [group, null] : [null, group];
    this.#named = named;
    this.#params = named.map(([, p]) => p);
    this.#original = this.#params.map((p) => persistent(noGrad(() => p.clone())));
    this.#residual = options.errorFeedback
      ? this.#params.map((p) => persistent(p.newEmpty(p.shape, { dtype: "f32", zero: true })))
      : null;
  }

  /**
   * Starts DiLoCo on this replica: copies the group's first rank's parameters to every rank (the
   * replicas must start from one θ) and keeps them as the first θ. Every rank of the group calls
   * it with an equal model.
   *
   * @param model The model (its trainable parameters take part).
   * @param innerOptimizer The optimizer of every step, over the model's parameters.
   * @param options See {@linkcode DiLoCoOptions}.
   * @returns DiLoCo on this replica.
   * @throws RangeError for a `syncEvery` that is not an integer of at least 1, an unknown
   *   `pseudoGradientDtype`, or error feedback with f32.
   * @throws Error naming a trainable parameter that the outer optimizer does not update.
   */
  static async create(
    model: Module,
    innerOptimizer: Optimizer<{ lr: number }>,
    options: DiLoCoOptions,
  ): Promise<DiLoCo> {
    checkSyncEvery(options.syncEvery, "DiLoCo");
    const pseudoGradientDtype = options.pseudoGradientDtype ?? "f32";
    if (!["f32", "bf16", "int8"].includes(pseudoGradientDtype)) {
      throw new RangeError(
        `DiLoCo: pseudoGradientDtype must be "f32", "bf16" or "int8", got ${pseudoGradientDtype}`,
      );
    }
    const errorFeedback = options.errorFeedback ?? pseudoGradientDtype !== "f32";
    if (errorFeedback && pseudoGradientDtype === "f32") {
      throw new RangeError(
        'DiLoCo: errorFeedback needs a pseudoGradientDtype of "bf16" or "int8" (f32 loses nothing)',
      );
    }
    const group = options.manager ?? replicaGroup(options.group, "DiLoCo");
    const named = trainableParameters(model, "DiLoCo");
    const outerOptimizer = options.outerOptimizer ??
      new SGD(named.map(([, p]) => p), { lr: 0.7, momentum: 0.9, nesterov: true });
    const outerParams = new Set(outerOptimizer.paramGroups.flatMap((g) => g.params));
    const missing = named.filter(([, p]) => !outerParams.has(p)).map(([name]) => name);
    if (missing.length > 0) {
      throw new Error(
        `DiLoCo: the outer optimizer does not update ${missing.join(", ")}; build it over ` +
          "model.parameters(), or those would return to their values at the last outer step " +
          "every time",
      );
    }
    if (group instanceof ProcessGroup) await broadcastFromFirst(named.map(([, p]) => p), group);
    const diloco = new DiLoCo(
      model,
      innerOptimizer,
      outerOptimizer,
      { syncEvery: options.syncEvery, pseudoGradientDtype, errorFeedback },
      group,
      named,
    );
    if (options.manager) {
      options.manager.registerState("diloco", {
        stateDict: () => diloco.stateDict(),
        loadStateDict: (s) => diloco.loadStateDict(s as DiLoCoStateDict),
      });
      await options.manager.startQuorum();
    }
    return diloco;
  }

  /**
   * Takes one inner step (`innerOptimizer.step()`), then the outer step when it is the
   * `syncEvery`-th since the last one. Call it in place of `innerOptimizer.step()`, on every
   * replica.
   *
   * @returns Whether this step ended with an outer step.
   */
  async step(): Promise<boolean> {
    this.innerOptimizer.step();
    this.#localStep++;
    if (this.#localStep < this.syncEvery) return false;
    await this.sync();
    return true;
  }

  /**
   * The outer step now ([Note: DiLoCo's outer step]), on every replica at once, whatever the inner
   * steps since the last; restarts the count.
   */
  async sync(): Promise<void> {
    const started = performance.now();
    const bytes = await tidyAsync(async () => {
      const pseudoGradient = noGrad(() => flatF32(this.#original).sub(flatF32(this.#params)));
      if (this.#residual !== null) noGrad(() => pseudoGradient.add_(flatF32(this.#residual!)));
      const segments = this.#named.map(([name, p]) => ({ name, numel: p.numel() }));
      const averaged = await this.#average(pseudoGradient, segments);
      if (averaged === null) {
        noGrad(() => this.#params.forEach((p, i) => p.copy_(this.#original[i])));
        return 0;
      }
      const { average, lost, bytes } = averaged;
      noGrad(() => {
        if (this.#residual !== null) {
          unflatten(lost!, this.#params).forEach((run, i) => this.#residual![i].copy_(run));
        }
        this.#outerStep(unflatten(average, this.#params));
      });
      return bytes;
    });
    this.#localStep = 0;
    this.lastSync = { bytes, ms: performance.now() - started };
    await this.#manager?.startQuorum();
  }

  /** The replicas' average; null when the manager's quorum did not commit the sync. */
  async #average(
    pseudoGradient: Tensor,
    segments: compression.Segment[],
  ): Promise<compression.CompressedAverage | null> {
    const average = (group: ProcessGroup) =>
      compression.averageOverGroup(pseudoGradient, this.pseudoGradientDtype, segments, group);
    const manager = this.#manager;
    if (manager === null) return await average(this.#group!);
    let averaged = null;
    if (manager.errored === null && manager.group !== null) {
      averaged = await average(manager.group).catch((err) => (manager.reportError(err), null));
    }
    return await manager.shouldCommit() ? averaged : null;
  }

  /** θ back into the model, the averaged pseudo-gradient as `.grad`, the outer step, the new θ. */
  #outerStep(pseudoGradients: Tensor[]): void {
    zeroGradients(this.#params, true);
    this.#params.forEach((p, i) => {
      p.copy_(this.#original[i]);
      p.grad = persistent(pseudoGradients[i].to(p.dtype).contiguous());
    });
    this.outerOptimizer.step();
    zeroGradients(this.#params, true);
    this.#params.forEach((p, i) => this.#original[i].copy_(p));
  }

  /** DiLoCo's state (θ, the residuals, the outer optimizer's), tensors shared. */
  stateDict(): DiLoCoStateDict {
    const original: Record<string, Tensor> = {}, residual: Record<string, Tensor> = {};
    this.#named.forEach(([name], i) => {
      original[name] = this.#original[i];
      if (this.#residual !== null) residual[name] = this.#residual[i];
    });
    return {
      localStep: this.#localStep,
      original,
      residual,
      outerOptimizer: this.outerOptimizer.stateDict(),
    };
  }

  /**
   * Restores a state dict from `stateDict()` of a DiLoCo with the same model and options.
   * @throws RangeError when `localStep` is not a count below `syncEvery`.
   * @throws Error naming a parameter that is missing or has another shape.
   */
  loadStateDict(dict: DiLoCoStateDict): void {
    if (
      !Number.isInteger(dict.localStep) || dict.localStep < 0 || dict.localStep >= this.syncEvery
    ) {
      throw new RangeError(
        `DiLoCo.loadStateDict: localStep must be an integer in [0, ${this.syncEvery}), ` +
          `got ${dict.localStep}`,
      );
    }
    const load = (field: "original" | "residual", into: Tensor[]) =>
      this.#named.forEach(([name], i) => {
        const t = dict[field][name];
        if (t === undefined || !sameShape(t.shape, into[i].shape)) {
          throw new Error(
            `DiLoCo.loadStateDict: ${field}.${name} is ${
              t === undefined ? "missing" : formatShape(t.shape)
            }, expected ${formatShape(into[i].shape)}`,
          );
        }
        noGrad(() => into[i].copy_(t));
      });
    load("original", this.#original);
    if (this.#residual !== null) load("residual", this.#residual);
    this.outerOptimizer.loadStateDict(dict.outerOptimizer);
    this.#localStep = dict.localStep;
  }

  /** Frees θ and the residuals (the model and the optimizers stay). Idempotent. */
  dispose(): void {
    for (const t of [...this.#original, ...(this.#residual ?? [])]) t.dispose();
  }

  /** `using diloco = ...` disposes at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** `t`, kept out of every `tidy` scope (θ, residuals and gradients outlive the sync). */
function persistent(t: Tensor): Tensor {
  t.persistent = true;
  return t;
}
