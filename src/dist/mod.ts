/**
 * Distributed training primitives: the rendezvous store, process groups and collectives
 * over a pluggable backend (Gloo on CPU).
 * @module
 */

export type { Backend, DType, NativeBuffer, ReduceOp } from "./backend.ts";
export { REDUCE_OPS } from "./backend.ts";
export { DistError, type DistErrorCode } from "./errors.ts";
export { type InitOptions } from "./init_method.ts";
export {
  destroyProcessGroup,
  getLocalRank,
  getRank,
  getWorldSize,
  initProcessGroup,
  isInitialized,
  newGroup,
  worldGroup,
} from "./init.ts";
export { allGather, allReduce, barrier, broadcast, reduceScatter } from "./collectives.ts";
export { ProcessGroup, type TensorLike, Work } from "./process_group.ts";
export { StoreClient, type StoreClientOptions } from "./store/client.ts";
export { StoreServer, type StoreServerOptions } from "./store/server.ts";
