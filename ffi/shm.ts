/**
 * The symbol table of the shared-memory transport (csrc/shm, built into `libdtrain_gloo.so`):
 * one segment per host-local group, collectives in ticket order. Every function returns a status
 * (`CollectiveStatus` of collective_codes.ts, csrc/gloo/collective_codes.h); a failure's message is read
 * with `dt_shm_last_error`. Collectives are `nonblocking`: they wait for their ticket's turn and
 * run on a worker thread, so the JavaScript thread issues the next one at once; only the
 * all-gather also comes blocking and started (for FSDP's synchronous forward). Arrays go in as
 * pointers, never `"buffer"`s: a nonblocking call with a buffer argument stalled its caller for
 * milliseconds (BENCHMARKS.md, "Shared memory between ranks").
 * @module
 */

import { lazyLibrary, type Symbols } from "./load.ts";

const symbols = {
  dt_shm_ctx_new: { parameters: ["buffer"], result: "i32" }, // int dt_shm_ctx_new(dt_shm_ctx **out)
  dt_shm_last_error: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx (NULL: the last failed dt_shm_ctx_new)
      "buffer", // char *buf
      "usize", // size_t len
    ],
    result: "i32",
  },
  dt_shm_ctx_open: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "buffer", // const char *name
      "i32", // int create
      "i32", // int rank
      "i32", // int size
      "buffer", // const int32_t *global_ranks
      "buffer", // const int32_t *pids
      "u64", // uint64_t slot_bytes
      "i64", // int64_t timeout_ms
    ],
    result: "i32",
  },
  dt_shm_ctx_handle: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "buffer", // char *buf
      "usize", // size_t len
    ],
    result: "i32",
  },
  dt_shm_ctx_wait_mapped: { parameters: ["pointer"], result: "i32", nonblocking: true }, // int dt_shm_ctx_wait_mapped(dt_shm_ctx *ctx)
  dt_shm_ctx_free: { parameters: ["pointer"], result: "i32" }, // int dt_shm_ctx_free(dt_shm_ctx *ctx)
  dt_shm_abort: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "i32", // int status
      "buffer", // const char *message
    ],
    result: "i32",
  },
  dt_shm_ticket: { parameters: ["pointer"], result: "u64" }, // uint64_t dt_shm_ticket(dt_shm_ctx *ctx)
  dt_shm_clock_us: { parameters: [], result: "f64" }, // double dt_shm_clock_us(void)
  dt_shm_allreduce: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "u64", // uint64_t ticket
      "pointer", // void *buf
      "u64", // uint64_t count
      "i32", // int dtype
      "i32", // int op
      "pointer", // double *timing
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_shm_broadcast: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "u64", // uint64_t ticket
      "pointer", // void *buf
      "u64", // uint64_t count
      "i32", // int dtype
      "i32", // int root
      "pointer", // double *timing
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_shm_allgather: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "u64", // uint64_t ticket
      "pointer", // const void *in
      "u64", // uint64_t count
      "i32", // int dtype
      "pointer", // void *const *outs
      "u64", // uint64_t nouts
      "pointer", // double *timing
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_shm_reduce_scatter: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "u64", // uint64_t ticket
      "pointer", // void *out
      "pointer", // const void *in
      "u64", // uint64_t out_count
      "i32", // int dtype
      "i32", // int op
      "pointer", // double *timing
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_shm_barrier: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "u64", // uint64_t ticket
      "pointer", // double *timing
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_shm_buffer_alloc: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "u64", // uint64_t ticket
      "u64", // uint64_t count
      "i32", // int dtype
      "pointer", // dt_shm_buffer **out
      "pointer", // double *timing
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_shm_buffer_data: { parameters: ["pointer"], result: "pointer" }, // void *dt_shm_buffer_data(dt_shm_buffer *buffer)
  dt_shm_buffer_free: { parameters: ["pointer"], result: "i32" }, // int dt_shm_buffer_free(dt_shm_buffer *buffer)
  // Blocking, on the JavaScript thread: FSDP's synchronous forward ([Note: blocking
  // collectives] in csrc/shm/internal.h says why it cannot wait for an unserved ticket).
  dt_shm_allgather_blocking: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "pointer", // const void *in
      "u64", // uint64_t count
      "i32", // int dtype
      "buffer", // void *const *outs
      "u64", // uint64_t nouts
    ],
    result: "i32",
  },
  dt_shm_allreduce_blocking: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "pointer", // void *buf
      "u64", // uint64_t count
      "i32", // int dtype
      "i32", // int op
      "pointer", // double *timing
    ],
    result: "i32",
  },
  dt_shm_reduce_scatter_blocking: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "pointer", // void *out
      "pointer", // const void *in
      "u64", // uint64_t out_count
      "i32", // int dtype
      "i32", // int op
      "pointer", // double *timing
    ],
    result: "i32",
  },
  dt_shm_broadcast_blocking: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "pointer", // void *buf
      "u64", // uint64_t count
      "i32", // int dtype
      "i32", // int root
    ],
    result: "i32",
  },
  dt_shm_allgather_start: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "pointer", // const void *in
      "u64", // uint64_t count
      "i32", // int dtype
      "buffer", // void *const *outs (copied)
      "u64", // uint64_t nouts
      "buffer", // dt_shm_work **out
    ],
    result: "i32",
  },
  dt_shm_work_wait: {
    parameters: [
      "pointer", // dt_shm_work *work
      "buffer", // char *error
      "usize", // size_t len
    ],
    result: "i32",
  },
  dt_shm_work_free: { parameters: ["pointer"], result: "i32" }, // int dt_shm_work_free(dt_shm_work *work)
  // Point-to-point, as dt_gloo_p2p_* in ffi/gloo.ts: posted on the JavaScript thread, run off it
  // or (the blocking forms) on it.
  dt_shm_p2p_post: {
    parameters: [
      "pointer", // dt_shm_ctx *ctx
      "i32", // int kind (0 send, 1 recv)
      "i32", // int peer (group rank)
      "pointer", // void *buf
      "u64", // uint64_t count
      "i32", // int dtype
      "u32", // uint32_t tag
      "buffer", // const int64_t *dims
      "u32", // uint32_t ndim
      "buffer", // dt_shm_p2p **out
    ],
    result: "i32",
  },
  dt_shm_p2p_run: { parameters: ["pointer"], result: "i32", nonblocking: true }, // int dt_shm_p2p_run(dt_shm_p2p *op)
  dt_shm_p2p_run_blocking: { name: "dt_shm_p2p_run", parameters: ["pointer"], result: "i32" },
  dt_shm_p2p_wait: { parameters: ["pointer"], result: "i32" }, // int dt_shm_p2p_wait(dt_shm_p2p *op)
  dt_shm_p2p_error: { parameters: ["pointer", "buffer", "usize"], result: "i32" }, // int dt_shm_p2p_error(dt_shm_p2p *op, char *buf, size_t len)
  dt_shm_p2p_free: { parameters: ["pointer"], result: "i32" }, // int dt_shm_p2p_free(dt_shm_p2p *op)
} as const satisfies Deno.ForeignLibraryInterface;

/** The shared-memory functions (64-bit counts take numbers: [Note: 64-bit integers]). */
export type ShmSymbols = Symbols<typeof symbols>;

/**
 * Opens the library once per process, on first call: `DTRAIN_GLOO_LIB` if set, else `build/`.
 *
 * @returns The library's shared-memory functions.
 * @throws Error naming the paths tried and saying to run `make build`.
 */
export const loadShm: () => ShmSymbols = lazyLibrary(
  "libdtrain_gloo.so",
  "DTRAIN_GLOO_LIB",
  symbols,
);

/** The symbol table itself, for tests/ffi/collectives_abi_test.ts (checked against the C header). */
export { symbols as shmSymbols };
