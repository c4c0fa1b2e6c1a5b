/**
 * Fault-tolerant replicas (torchft's model): per-step quorums over the rendezvous store, a
 * communicator per quorum, healing from a live peer, and data split by step and quorum.
 * @module
 */

export * from "./manager.ts";
export * from "./samples.ts";
