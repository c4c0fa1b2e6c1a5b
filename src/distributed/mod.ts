/**
 * Distributed training primitives: the rendezvous store, process groups and collectives
 * over the backends of one table (src/distributed/backends.ts: Gloo and shared memory for host memory,
 * NCCL for GPU memory, "auto" pairing them).
 * @module
 */

export * from "./backend.ts";
export * from "./blocking_diagnosis.ts";
export * from "./errors.ts";
export * from "./init_method.ts";
export * from "./init.ts";
export * from "./collectives.ts";
export * from "./device_mesh.ts";
export * from "./process_group.ts";
export * from "./shared_tensor.ts";
export * from "./stragglers.ts";
export * from "./work.ts";
export * from "./store/client.ts";
export * from "./store/server.ts";
export * from "./p2p.ts";
