/**
 * The symbol table of `libdtrain_gloo.so` (csrc/gloo): Gloo contexts and collectives on raw
 * pointers. Every function returns a status (0 = ok, codes in csrc/gloo/dtrain_gloo.h); the
 * message of a failure is read with `dt_gloo_last_error` on the same context. Collectives and
 * the rendezvous are `nonblocking`: they run on a worker thread and return a Promise, so the
 * JavaScript thread keeps working while buckets reduce.
 * @module
 */

import { openLibrary } from "./load.ts";

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

/** The opened library's symbols, typed by the table above. */
export type GlooSymbols = Deno.DynamicLibrary<typeof symbols>["symbols"];

let lib: Deno.DynamicLibrary<typeof symbols> | undefined;

/**
 * Opens `libdtrain_gloo.so` once per process: `DTRAIN_GLOO_LIB` if set, else `build/`.
 *
 * @returns The library's symbols.
 * @throws Error naming the paths tried and saying to run `make build`.
 */
export function loadGloo(): GlooSymbols {
  lib ??= openLibrary("libdtrain_gloo.so", "DTRAIN_GLOO_LIB", symbols);
  return lib.symbols;
}
