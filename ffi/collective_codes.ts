/**
 * The codes every collective backend's native shim shares (Gloo and shared memory in
 * `libdtrain_gloo.so`, NCCL in `libdtrain_cuda.so`), the numbers of csrc/gloo/collective_codes.h:
 * the statuses their functions return and the element types and reductions they take
 * (tests/ffi/enums_test.ts holds each to its enum there, name for name).
 * @module
 */

/** Status codes returned by every collective function (dt_collective_status in collective_codes.h). */
export const CollectiveStatus = {
  OK: 0,
  /** A bad argument, caught before anything was sent. */
  EINVAL: 1,
  /** A peer did not answer within the context timeout. */
  ETIMEOUT: 2,
  /** A connection to a peer failed (the peer died or reset). */
  EPEER: 3,
  /** Ranks called different collectives (the fingerprint check). */
  EMISMATCH: 4,
  /** The rendezvous store refused or failed (Gloo only). */
  ESTORE: 5,
  /** The context failed earlier and can no longer be used. */
  EBROKEN: 6,
  /** Anything else (an exception from Gloo or the C++ runtime, a CUDA error). */
  EINTERNAL: 7,
} as const;

/**
 * Element types of the collectives (dt_collective_dtype), numbered as libdtrain's `DTypeCode` (2, bool, takes
 * no collective). bf16 and f16 reduce through f32 one pair at a time, each step rounded ([Note:
 * half reductions] in csrc/gloo/reduce.cc).
 */
export const CollectiveDType = { f32: 0, i32: 1, bf16: 3, f16: 4 } as const;

/** Reduction operators of all-reduce and reduce-scatter (dt_collective_reduce_op). */
export const CollectiveReduceOp = { sum: 0, avg: 1, min: 2, max: 3, prod: 4 } as const;

/** Which side of a point-to-point message a rank posts (`dt_p2p_kind`). */
export const P2PKind = { send: 0, recv: 1 } as const;
