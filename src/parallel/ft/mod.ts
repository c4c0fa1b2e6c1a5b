/**
 * Fault-tolerant replicas (torchft's model): per-step quorums over the rendezvous store, a
 * communicator per quorum, healing from a live peer, and data split by step and quorum.
 * @module
 */

export * from "./manager.ts";
export type { ManagerOptions } from "./manager_options.ts";
export type { ReplicaState } from "./heal.ts";
export type { Quorum, QuorumMember } from "./quorum.ts";
export * from "./samples.ts";
