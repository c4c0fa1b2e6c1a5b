/**
 * Fault-tolerant replicas (torchft's `Manager`): before every step the live replicas agree on a
 * quorum, the replicated dimension's communicator is formed among its members, a replica that is
 * behind heals from a live peer, and the step commits only if every member finished it.
 * @module
 */

import { DistError } from "../../distributed/errors.ts";
import { GlooBackend } from "../../distributed/gloo.ts";
import { ProcessGroup } from "../../distributed/process_group.ts";
import { StoreClient } from "../../distributed/store/client.ts";
import type { ReduceOp } from "../../distributed/backend.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import { broadcastState, type ReplicaState } from "./heal.ts";
import {
  joinQuorum,
  LIVENESS_RANK_BASE,
  nextRound,
  type Quorum,
  QuorumKeys,
  voteCommit,
} from "./quorum.ts";
import { type ManagerOptions, type Settings, withDefaults } from "./manager_options.ts";
import { type SampleRange, stepSamples } from "./samples.ts";

/** What a replica's manager shares with one that heals from it. */
interface ManagerState {
  step: number;
  samplesSkipped: number;
}

/**
 * One replica's view of the fault-tolerant job. The training loop, on every replica:
 *
 * ```text
 * await manager.startQuorum();             // quorum, communicator, healing
 * const { start, end } = manager.samples(); // this replica's share of the step's batch
 * ...forward and backward on those samples...
 * await manager.allReduce(flatGradients);   // average over the quorum; a failure is recorded
 * if (await manager.shouldCommit()) optimizer.step();
 * ```
 *
 * A failed step (a member died or hung past `timeoutMs`) commits nowhere: every member's
 * `shouldCommit()` returns false, and the next `startQuorum()` forms a quorum of those still
 * there, which retries the same step with the same samples split over them. A replica that starts
 * later (or again) enters a quorum and receives the registered state (`registerState`) from a
 * member at the highest step before its first step.
 *
 * @example One replica's step (a quorum of one)
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, nn, ones, optim, parallel } from "../../../mod.ts";
 * // The store that keeps the quorums: in a job, a process that outlives the replicas.
 * const server = dist.StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "t" });
 * const store = { hostname: "127.0.0.1", port: server.port, token: "t" };
 * const manager = await parallel.Manager.connect({ store, replicaId: 0, batchSize: 4 });
 * const model = new nn.Linear(4, 1);
 * const optimizer = new optim.SGD(model.parameters(), { lr: 0.1 });
 * manager.registerState("model", {
 *   stateDict: () => model.stateDict(),
 *   loadStateDict: (s) => model.loadStateDict(s as nn.StateDict),
 * });
 * const quorum = await manager.startQuorum();
 * assert.deepEqual(quorum.members.map((m) => m.replicaId), [0]);
 * assert.deepEqual(manager.samples(), { start: 0, end: 4 });
 * optimizer.zeroGrad();
 * model.forward(ones([4, 4])).sum().backward();
 * assert.equal(await manager.allReduce(model.weight.grad!), true);
 * if (await manager.shouldCommit()) optimizer.step();
 * assert.equal(manager.currentStep, 1);
 * await manager.close();
 * await server.close();
 * ```
 */
export class Manager {
  /** This replica's id. */
  readonly replicaId: number;
  /** Samples per step over all replicas. */
  readonly batchSize: number;
  /** Bound on each collective, forming a communicator, healing and the vote, in ms. */
  readonly timeoutMs: number;
  readonly #options: Settings;
  readonly #store: StoreClient;
  /** Deletes old rounds' keys beside the steps (a connection that counts for no liveness). */
  readonly #housekeeper: StoreClient;
  readonly #keys: QuorumKeys;
  readonly #host: string;
  readonly #states = new Map<string, ReplicaState>();
  #step = 0;
  #samplesSkipped = 0;
  #quorum: Quorum | null = null;
  #group: ProcessGroup | null = null;
  #errored: unknown = null;
  #commitFailures = 0;
  #healed = false;
  #voted = true;

  private constructor(
    options: Settings,
    store: StoreClient,
    housekeeper: StoreClient,
    host: string,
  ) {
    this.#options = options;
    this.replicaId = options.replicaId;
    this.batchSize = options.batchSize;
    this.timeoutMs = options.timeoutMs;
    this.#store = store;
    this.#housekeeper = housekeeper;
    this.#keys = new QuorumKeys(options.prefix);
    this.#host = host;
  }

  /**
   * Connects this replica to the job's store. It takes part from its first `startQuorum()`.
   *
   * @param options See {@linkcode ManagerOptions}.
   * @returns The manager.
   * @throws RangeError for a replica id, batch size or replica count that is not a valid integer.
   * @throws DistError when the store cannot be reached.
   */
  static async connect(options: ManagerOptions): Promise<Manager> {
    const settings = withDefaults(options);
    const store = await StoreClient.connect({
      ...options.store,
      rank: LIVENESS_RANK_BASE + options.replicaId,
      timeoutMs: settings.timeoutMs,
    });
    const housekeeper = await StoreClient.connect({
      ...options.store,
      timeoutMs: settings.timeoutMs,
    })
      .catch((err) => {
        store.close();
        throw err;
      });
    return new Manager(settings, store, housekeeper, options.host ?? store.localAddress);
  }

  /**
   * Adds state that a healing replica receives under `key` (the model's, the optimizer's,
   * DiLoCo's). Every replica registers the same keys before its first `startQuorum()`.
   *
   * @throws Error when `key` is taken.
   */
  registerState(key: string, state: ReplicaState): void {
    if (key === "manager" || this.#states.has(key)) {
      throw new Error(`Manager.registerState: the key "${key}" is taken`);
    }
    this.#states.set(key, state);
  }

  /** Steps committed: the index of the step being taken. */
  get currentStep(): number {
    return this.#step;
  }

  /** The current quorum (null before the first `startQuorum()`). */
  get quorum(): Quorum | null {
    return this.#quorum;
  }

  /**
   * The communicator among the quorum's members (group ranks are replica ids); null before the
   * first quorum or when forming it failed (the step then cannot commit).
   */
  get group(): ProcessGroup | null {
    return this.#group;
  }

  /** Replicas in the current quorum. */
  get numParticipants(): number {
    return this.#quorum?.members.length ?? 0;
  }

  /**
   * Whether the last `startQuorum()` loaded a peer's state into this replica (it was behind, or
   * it is step 0 and this replica is not the quorum's first).
   */
  get healed(): boolean {
    return this.#healed;
  }

  /** Samples no committed step's quorum took (the remainders of uneven splits). */
  get samplesSkipped(): number {
    return this.#samplesSkipped;
  }

  /** The error recorded in this step (by `allReduce`, forming or healing), or null. */
  get errored(): unknown {
    return this.#errored;
  }

  /**
   * Records a failure of this step: this replica votes against committing it. Call it for a
   * collective of your own that failed.
   */
  reportError(err: unknown): void {
    this.#errored ??= err;
  }

  /**
   * Agrees on the quorum of the next step with the other live replicas, forms the communicator
   * when the members changed (or one failed its last step), and heals the members behind the
   * highest step: each receives the registered state of the first member at that step. At step 0
   * every member takes the first member's state, so replicas start equal. A failure to form or
   * heal is recorded and fails the step.
   *
   * @returns The quorum.
   * @throws DistError "timeout" when no quorum of `minReplicas` forms within `quorumTimeoutMs`.
   */
  async startQuorum(): Promise<Quorum> {
    if (!this.#voted) throw new Error("Manager.startQuorum: call shouldCommit() after every step");
    const round = this.#quorum === null
      ? await nextRound(this.#store, this.#keys)
      : this.#quorum.round + 1;
    const me = { replicaId: this.replicaId, step: this.#step, errored: this.#commitFailures > 0 };
    const quorum = await joinQuorum(
      this.#store,
      this.#keys,
      me,
      round,
      this.#options,
      this.#housekeeper,
    );
    const regroup = quorum.quorumId !== this.#quorum?.quorumId || this.#group === null;
    this.#quorum = quorum;
    this.#errored = null;
    this.#healed = false;
    this.#voted = false;
    if (regroup) {
      await this.#group?.destroy();
      this.#group = null;
      try {
        this.#group = await this.#connect(quorum);
      } catch (err) {
        this.reportError(err);
        return quorum;
      }
    }
    try {
      await this.#heal(quorum, this.#group!);
    } catch (err) {
      this.reportError(err);
    }
    return quorum;
  }

  async #connect(quorum: Quorum): Promise<ProcessGroup> {
    const ids = quorum.members.map((m) => m.replicaId);
    const rank = ids.indexOf(this.replicaId);
    const backend = await GlooBackend.connect({
      rank,
      size: ids.length,
      globalRanks: ids,
      storeHost: this.#options.store.hostname,
      storePort: this.#options.store.port,
      token: this.#options.store.token,
      prefix: this.#keys.group(quorum.quorumId),
      host: this.#host,
      iface: "",
      timeoutMs: this.timeoutMs,
    });
    const connected = { name: "gloo", backends: [backend], unreachable: {} };
    return new ProcessGroup(ids, rank, connected, undefined, `ft-q${quorum.quorumId}`);
  }

  /**
   * Sends the state of the first member at the highest step to the members behind it (at step 0,
   * to every other member).
   */
  async #heal(quorum: Quorum, group: ProcessGroup): Promise<void> {
    const maxStep = Math.max(...quorum.members.map((m) => m.step));
    const source = quorum.members.find((m) => m.step === maxStep)!.replicaId;
    const receivers = quorum.members.filter((m) =>
      m.replicaId !== source && (m.step < maxStep || maxStep === 0)
    );
    if (receivers.length === 0) return;
    const state = source === this.replicaId ? this.#stateDict() : null;
    const received = await broadcastState(group, source, state);
    if (received === null) return;
    try {
      if (!receivers.some((m) => m.replicaId === this.replicaId)) return;
      const tree = received.state as Record<string, unknown>;
      for (const [key, s] of this.#states) {
        if (!(key in tree)) throw new Error(`heal: replica ${source} sent no state "${key}"`);
        s.loadStateDict(tree[key]);
      }
      ({ step: this.#step, samplesSkipped: this.#samplesSkipped } = tree.manager as ManagerState);
      this.#healed = true;
    } finally {
      received.tensors.forEach((t) => t.dispose());
    }
  }

  #stateDict(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [key, s] of this.#states) out[key] = s.stateDict();
    out.manager = { step: this.#step, samplesSkipped: this.#samplesSkipped } as ManagerState;
    return out;
  }

  /**
   * This replica's share of the current step's samples: the step's `batchSize` samples split
   * into equal contiguous runs over the quorum's members (`stepSamples`).
   *
   * @throws Error before `startQuorum()`.
   */
  samples(): SampleRange {
    const quorum = this.#requireQuorum("samples");
    const i = quorum.members.findIndex((m) => m.replicaId === this.replicaId);
    return stepSamples(this.#step, this.batchSize, quorum.members.length).shares[i];
  }

  /**
   * Reduces `t` in place over the quorum ("avg" by default: the mean of the members'). A failure
   * (a member died, or hung past `timeoutMs`) is recorded, not thrown: the step will not commit
   * and `t` must not be used. After an earlier failure in the step it sends nothing.
   *
   * @returns Whether the reduction completed.
   */
  async allReduce(t: Tensor, op: ReduceOp = "avg"): Promise<boolean> {
    this.#requireQuorum("allReduce");
    if (this.#errored !== null || this.#group === null) return false;
    try {
      await this.#group.allReduce(t, op).wait();
      return true;
    } catch (err) {
      this.reportError(err);
      return false;
    }
  }

  /**
   * Votes on the step and returns the quorum's decision (torchft's `should_commit`): true only if
   * every member voted yes, the same answer on every member. Call it once per step, after the
   * step's collectives and before the optimizer step; step the optimizer only on true. A commit
   * advances `currentStep` and counts the step's skipped samples.
   *
   * @throws Error after more than `maxRetries` failed steps in a row.
   */
  async shouldCommit(): Promise<boolean> {
    const quorum = this.#requireQuorum("shouldCommit");
    if (this.#voted) throw new Error("Manager.shouldCommit: called twice in one step");
    this.#voted = true;
    const yes = this.#errored === null && this.#group !== null;
    let commit = false;
    try {
      commit = await voteCommit(
        this.#store,
        this.#keys,
        quorum,
        this.replicaId,
        yes,
        this.timeoutMs,
      );
    } catch (err) {
      this.reportError(err);
    }
    if (commit) {
      const { skipped } = stepSamples(this.#step, this.batchSize, quorum.members.length);
      this.#samplesSkipped += skipped === null ? 0 : skipped.end - skipped.start;
      this.#step++;
      this.#commitFailures = 0;
      return true;
    }
    this.#commitFailures++;
    const max = this.#options.maxRetries;
    if (max !== undefined && this.#commitFailures > max) {
      throw new Error(
        `Manager: ${this.#commitFailures} steps in a row failed to commit (maxRetries ${max}); ` +
          `last error: ${this.#errored}`,
      );
    }
    return false;
  }

  #requireQuorum(what: string): Quorum {
    if (this.#quorum === null) {
      throw new DistError("invalid", `Manager.${what}: call startQuorum() first`);
    }
    return this.#quorum;
  }

  /** Leaves the job: closes the communicator and the store connection. Idempotent. */
  async close(): Promise<void> {
    await this.#group?.destroy();
    this.#group = null;
    this.#store.close();
    this.#housekeeper.close();
  }
}
