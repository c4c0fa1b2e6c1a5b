/**
 * The options of a fault-tolerant replica's `Manager`, and their defaults.
 * @module
 */

/** Options of {@linkcode Manager.connect}. */
export interface ManagerOptions {
  /** The store that keeps the quorums (torchft's Lighthouse): its host, port and job token. */
  store: { hostname: string; port: number; token: string };
  /** This replica's id: a non-negative integer no other live replica has. */
  replicaId: number;
  /** Samples per step over all replicas (for `samples()` and the skipped count). */
  batchSize: number;
  /** Fewest replicas a quorum may have (default 1). */
  minReplicas?: number;
  /**
   * Bound on each collective, on forming a communicator, on healing and on the commit vote
   * (default 30 s): a hung member fails the step after it.
   */
  timeoutMs?: number;
  /** How long a quorum waits for live replicas that have not entered it (default 2 s). */
  joinTimeoutMs?: number;
  /** Longest wait for a quorum at all, e.g. for a newcomer while the others step (default 5 min). */
  quorumTimeoutMs?: number;
  /** Store keys' prefix, to run several jobs on one store (default "dtrain/ft/"). */
  prefix?: string;
  /** Address the communicator binds (default: this side's address of the store connection). */
  host?: string;
  /** Consecutive failed steps after which `shouldCommit` throws (default: never). */
  maxRetries?: number;
}

/** The options with their defaults. */
export type Settings = Required<Omit<ManagerOptions, "maxRetries" | "host">> & {
  maxRetries?: number;
};

/**
 * The options with their defaults.
 * @throws RangeError for a replica id, batch size or replica count that is not a valid integer.
 */
export function withDefaults(options: ManagerOptions): Settings {
  const counts = [
    ["replicaId", options.replicaId, 0],
    ["batchSize", options.batchSize, 1],
    ["minReplicas", options.minReplicas ?? 1, 1],
  ] as const;
  for (const [name, v, least] of counts) {
    if (!Number.isInteger(v) || v < least) {
      throw new RangeError(`Manager: ${name} must be an integer of at least ${least}, got ${v}`);
    }
  }
  return {
    store: options.store,
    replicaId: options.replicaId,
    batchSize: options.batchSize,
    minReplicas: options.minReplicas ?? 1,
    timeoutMs: options.timeoutMs ?? 30_000,
    joinTimeoutMs: options.joinTimeoutMs ?? 2_000,
    quorumTimeoutMs: options.quorumTimeoutMs ?? 300_000,
    prefix: options.prefix ?? "dtrain/ft/",
    maxRetries: options.maxRetries,
  };
}
