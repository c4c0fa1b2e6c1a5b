/**
 * The symbol table of `libdtrain_gloo.so` (csrc/gloo): Gloo contexts and collectives on raw
 * pointers. Every function returns a status (0 = ok, `CollectiveStatus` of collective_codes.ts,
 * which also has the dtype and reduce-op codes); the message of a failure is read with
 * `dt_gloo_last_error` on the same context. Collectives and the rendezvous are `nonblocking`:
 * they run on a worker thread and return a Promise, so the JavaScript thread keeps working while
 * buckets reduce.
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
  // The same C functions on the JavaScript thread, for the collectives of tensor parallelism
  // inside synchronous forward and backward code.
  dt_gloo_allreduce_blocking: {
    name: "dt_gloo_allreduce",
    parameters: ["pointer", "pointer", "u64", "i32", "i32"], // as dt_gloo_allreduce
    result: "i32",
  },
  dt_gloo_reduce_scatter_blocking: {
    name: "dt_gloo_reduce_scatter",
    parameters: ["pointer", "pointer", "pointer", "u64", "i32", "i32"], // as dt_gloo_reduce_scatter
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
  // Point-to-point: a post numbers the message on the JavaScript thread (that fixes the order
  // messages between two ranks match in), the run moves it off it, or on it for the blocking forms.
  dt_gloo_p2p_post: {
    parameters: [
      "pointer", // dt_gloo_ctx *ctx
      "i32", // int kind (0 send, 1 recv)
      "i32", // int peer (group rank)
      "pointer", // void *buf
      "u64", // uint64_t count
      "i32", // int dtype
      "u32", // uint32_t tag
      "buffer", // const int64_t *dims
      "u32", // uint32_t ndim
      "buffer", // dt_gloo_p2p **out
    ],
    result: "i32",
  },
  dt_gloo_p2p_run: { parameters: ["pointer"], result: "i32", nonblocking: true }, // int dt_gloo_p2p_run(dt_gloo_p2p *op)
  dt_gloo_p2p_run_blocking: { name: "dt_gloo_p2p_run", parameters: ["pointer"], result: "i32" },
  dt_gloo_p2p_wait: { parameters: ["pointer"], result: "i32" }, // int dt_gloo_p2p_wait(dt_gloo_p2p *op)
  dt_gloo_p2p_error: { parameters: ["pointer", "buffer", "usize"], result: "i32" }, // int dt_gloo_p2p_error(dt_gloo_p2p *op, char *buf, size_t len)
  dt_gloo_p2p_free: { parameters: ["pointer"], result: "i32" }, // int dt_gloo_p2p_free(dt_gloo_p2p *op)
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

/** The symbol table itself, for tests/ffi/collectives_abi_test.ts (checked against the C header). */
export { symbols as glooSymbols };
