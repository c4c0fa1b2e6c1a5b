/**
 * The symbol table of `libdtrain_gloo.so` (csrc/gloo): Gloo contexts and collectives on raw
 * pointers. Every function returns a status (0 = ok, codes in csrc/gloo/dtrain_gloo.h); the
 * message of a failure is read with `dt_gloo_last_error` on the same context. Collectives and
 * the rendezvous are `nonblocking`: they run on a worker thread and return a Promise, so the
 * JavaScript thread keeps working while buckets reduce. The ABI enums follow the table.
 * @module
 */

import { lazyLibrary, type Symbols } from "./load.ts";

const symbols = {
  dt_gloo_ctx_new: { parameters: ["buffer"], result: "i32" }, // int dt_gloo_ctx_new(dt_gloo_ctx **out)
  dt_gloo_last_error: {
    parameters: [
      "pointer", // dt_gloo_ctx *ctx (NULL: the last failed dt_gloo_ctx_new)
      "buffer", // char *buf
      "usize", // size_t len
    ],
    result: "i32",
  },
  dt_gloo_ctx_connect: {
    parameters: [
      "pointer", // dt_gloo_ctx *ctx
      "buffer", // const char *store_host
      "i32", // int store_port
      "buffer", // const char *token
      "buffer", // const char *prefix
      "i32", // int rank
      "i32", // int size
      "buffer", // const int32_t *global_ranks
      "buffer", // const char *host
      "buffer", // const char *iface
      "i64", // int64_t timeout_ms
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_gloo_ctx_free: { parameters: ["pointer"], result: "i32" }, // int dt_gloo_ctx_free(dt_gloo_ctx *ctx)
  dt_gloo_allreduce: {
    parameters: [
      "pointer", // dt_gloo_ctx *ctx
      "pointer", // void *buf
      "u64", // uint64_t count
      "i32", // int dtype
      "i32", // int op
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_gloo_broadcast: {
    parameters: [
      "pointer", // dt_gloo_ctx *ctx
      "pointer", // void *buf
      "u64", // uint64_t count
      "i32", // int dtype
      "i32", // int root
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_gloo_allgather: {
    parameters: [
      "pointer", // dt_gloo_ctx *ctx
      "pointer", // const void *in
      "u64", // uint64_t count
      "i32", // int dtype
      "buffer", // void *const *outs
      "u64", // uint64_t nouts
    ],
    result: "i32",
    nonblocking: true,
  },
  // The same C function, called on the JavaScript thread: for callers that cannot await (the
  // all-gather in FSDP's synchronous forward).
  dt_gloo_allgather_blocking: {
    name: "dt_gloo_allgather",
    parameters: ["pointer", "pointer", "u64", "i32", "buffer", "u64"], // as dt_gloo_allgather
    result: "i32",
  },
  // Starts dt_gloo_allgather on a native thread of its own and returns at once (before the
  // collective ends): FSDP's forward starts the next group's gather, then computes.
  dt_gloo_allgather_start: {
    parameters: [
      "pointer", // dt_gloo_ctx *ctx
      "pointer", // const void *in
      "u64", // uint64_t count
      "i32", // int dtype
      "buffer", // void *const *outs
      "u64", // uint64_t nouts
      "buffer", // dt_gloo_work **work
    ],
    result: "i32",
  },
  // Blocks the calling (JavaScript) thread until the started collective ends.
  dt_gloo_work_wait: { parameters: ["pointer"], result: "i32" }, // int dt_gloo_work_wait(dt_gloo_work *work)
  dt_gloo_work_free: { parameters: ["pointer"], result: "i32" }, // int dt_gloo_work_free(dt_gloo_work *work)
  dt_gloo_reduce_scatter: {
    parameters: [
      "pointer", // dt_gloo_ctx *ctx
      "pointer", // void *out
      "pointer", // const void *in
      "u64", // uint64_t out_count
      "i32", // int dtype
      "i32", // int op
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_gloo_barrier: { parameters: ["pointer"], result: "i32", nonblocking: true }, // int dt_gloo_barrier(dt_gloo_ctx *ctx)
} as const satisfies Deno.ForeignLibraryInterface;

/** The functions of `libdtrain_gloo.so` (64-bit counts take numbers: [Note: 64-bit integers]). */
export type GlooSymbols = Symbols<typeof symbols>;

/**
 * Opens `libdtrain_gloo.so` once per process, on first call: `DTRAIN_GLOO_LIB` if set, else
 * `build/`.
 *
 * @returns The library's functions.
 * @throws Error naming the paths tried and saying to run `make build`.
 */
export const loadGloo: () => GlooSymbols = lazyLibrary(
  "libdtrain_gloo.so",
  "DTRAIN_GLOO_LIB",
  symbols,
);

/** Status codes returned by every function (enum dt_status in csrc/gloo/dtrain_gloo.h). */
export const GlooStatus = {
  OK: 0,
  /** A bad argument, caught before anything was sent. */
  EINVAL: 1,
  /** A peer did not answer within the context timeout. */
  ETIMEOUT: 2,
  /** A connection to a peer failed (the peer died or reset). */
  EPEER: 3,
  /** Ranks called different collectives (the fingerprint check). */
  EMISMATCH: 4,
  /** The rendezvous store refused or failed. */
  ESTORE: 5,
  /** The context failed earlier and can no longer be used. */
  EBROKEN: 6,
  /** Anything else (an exception from Gloo or the C++ runtime). */
  EINTERNAL: 7,
} as const;

/** Element types of the collectives (enum dt_dtype). */
export const GlooDType = { f32: 0, i32: 1 } as const;

/** Reduction operators of all-reduce and reduce-scatter (enum dt_reduce_op). */
export const GlooReduceOp = { sum: 0, avg: 1, min: 2, max: 3, prod: 4 } as const;
