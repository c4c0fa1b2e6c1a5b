/**
 * The symbol table of `libdtrain_cuda.so` (csrc/cuda): libdtrain's kernels under their own names
 * and prototypes (the table is ffi/dtrain.ts's, shared), the CUDA runtime entry points (devices,
 * copies, synchronisation, matmul precision) and the NCCL shim. Kernels and runtime calls return
 * a status (`CudaStatus`) whose message is read with `dt_last_error`; NCCL calls return the
 * collective codes (`CollectiveStatus`, ffi/collective_codes.ts) with the message read from their
 * context by `dt_nccl_last_error`.
 * The library links neither cuBLAS nor NCCL: it opens them on first use (csrc/cuda/libs.cu), so it
 * loads on machines without a GPU, where `dt_cuda_device_count` says what is missing.
 * @module
 */

import { dtrainSymbols, Status } from "./dtrain.ts";
import { lazyLibrary, type Symbols } from "./load.ts";

/**
 * libdtrain's table without its CPU-only sections of dtrain.h, which the CUDA library has no use
 * for: the thread pool, and the file mappings (host memory, which libdtrain maps for either device).
 */
function withoutCpuOnly<T extends typeof dtrainSymbols>(
  table: T,
): Omit<T, "dt_set_num_threads" | "dt_get_num_threads" | "dt_map_file" | "dt_unmap_file"> {
  const {
    dt_set_num_threads: _set,
    dt_get_num_threads: _get,
    dt_map_file: _map,
    dt_unmap_file: _unmap,
    ...rest
  } = table;
  return rest;
}

/**
 * libdtrain's attention entries, which tests/tensor/attention_cuda_test.ts opens in both libraries
 * to compare them.
 */
export const attentionSymbols = {
  dt_attention_forward: dtrainSymbols.dt_attention_forward,
  dt_attention_backward: dtrainSymbols.dt_attention_backward,
} as const;

const symbols = {
  ...withoutCpuOnly(dtrainSymbols),
  // runtime.cu (and alloc.cu: dt_cuda_allocated_bytes_on)
  dt_cuda_device_count: { parameters: ["buffer"], result: "i32" }, // int dt_cuda_device_count(int32_t *count)
  dt_cuda_device_name: { parameters: ["i32", "buffer", "i64"], result: "i32" }, // (int32_t index, char *buf, int64_t len)
  dt_cuda_use_device: { parameters: ["i32"], result: "i32" }, // int dt_cuda_use_device(int32_t index)
  dt_cuda_synchronize: { parameters: [], result: "i32" }, // int dt_cuda_synchronize(void)
  dt_cuda_copy_in: { parameters: ["pointer", "pointer", "i64"], result: "i32" }, // (void *dst, const void *host_src, int64_t nbytes)
  dt_cuda_copy_out: { parameters: ["pointer", "pointer", "i64"], result: "i32" }, // (void *host_dst, const void *src, int64_t nbytes)
  dt_cuda_allocated_bytes_on: { parameters: ["i32"], result: "i64" }, // int64_t dt_cuda_allocated_bytes_on(int32_t index)
  dt_cuda_mem_info: { parameters: ["buffer", "buffer"], result: "i32" }, // (int64_t *free_bytes, int64_t *total_bytes)
  // pinned.cu: the DataLoader's pinMemory path
  dt_cuda_copy_in_pinned: { parameters: ["i32", "buffer", "buffer", "buffer"], result: "i32" }, // (int32_t n, void *const *dsts, const void *const *host_srcs, const int64_t *nbytes)
  dt_cuda_pinned_bytes: { parameters: ["i32"], result: "i64" }, // int64_t dt_cuda_pinned_bytes(int32_t index)
  // matmul.cu, libs.cu
  dt_cuda_set_matmul_precision: { parameters: ["i32"], result: "i32" }, // int dt_cuda_set_matmul_precision(int32_t mode)
  dt_cuda_get_matmul_precision: { parameters: [], result: "i32" }, // int32_t dt_cuda_get_matmul_precision(void)
  dt_cuda_library_available: { parameters: ["i32"], result: "i32" }, // int dt_cuda_library_available(int32_t which)
  // nccl.cu
  dt_nccl_unique_id: { parameters: ["buffer"], result: "i32" }, // int dt_nccl_unique_id(uint8_t out[128])
  dt_nccl_ctx_new: {
    parameters: [
      "i32", // int32_t device
      "i32", // int32_t rank
      "i32", // int32_t size
      "buffer", // const int32_t *global_ranks
      "i64", // int64_t timeout_ms
      "buffer", // void **out
    ],
    result: "i32",
  },
  dt_nccl_connect: { parameters: ["pointer", "buffer"], result: "i32", nonblocking: true }, // (void *ctx, const uint8_t id[128])
  dt_nccl_last_error: { parameters: ["pointer", "buffer", "i64"], result: "i32" }, // (void *ctx, char *buf, int64_t len)
  dt_nccl_mark: { parameters: ["pointer"], result: "i32" }, // int dt_nccl_mark(void *ctx)
  dt_nccl_allreduce: {
    parameters: ["pointer", "pointer", "u64", "i32", "i32"], // (void *ctx, void *buf, uint64_t count, int32_t dtype, int32_t op)
    result: "i32",
    nonblocking: true,
  },
  dt_nccl_broadcast: {
    parameters: ["pointer", "pointer", "u64", "i32", "i32"], // (void *ctx, void *buf, uint64_t count, int32_t dtype, int32_t root)
    result: "i32",
    nonblocking: true,
  },
  dt_nccl_allgather: {
    parameters: ["pointer", "pointer", "u64", "i32", "buffer", "u64"], // (void *ctx, const void *in, uint64_t count, int32_t dtype, void *const *outs, uint64_t nouts)
    result: "i32",
    nonblocking: true,
  },
  // The same all-gather on the calling thread, for FSDP's synchronous forward: it returns once
  // the gather is done (or failed, or timed out and aborted the communicator).
  dt_nccl_allgather_blocking: {
    parameters: ["pointer", "pointer", "u64", "i32", "buffer", "u64"], // (as dt_nccl_allgather)
    result: "i32",
  },
  dt_nccl_reduce_scatter: {
    parameters: ["pointer", "pointer", "pointer", "u64", "i32", "i32"], // (void *ctx, void *out, const void *in, uint64_t out_count, int32_t dtype, int32_t op)
    result: "i32",
    nonblocking: true,
  },
  // The all-reduce and reduce-scatter on the calling thread, as dt_nccl_allgather_blocking (for
  // tensor parallelism's synchronous forward and backward).
  dt_nccl_allreduce_blocking: {
    parameters: ["pointer", "pointer", "u64", "i32", "i32"], // (as dt_nccl_allreduce)
    result: "i32",
  },
  dt_nccl_reduce_scatter_blocking: {
    parameters: ["pointer", "pointer", "pointer", "u64", "i32", "i32"], // (as dt_nccl_reduce_scatter)
    result: "i32",
  },
  dt_nccl_barrier: { parameters: ["pointer"], result: "i32", nonblocking: true }, // int dt_nccl_barrier(void *ctx)
  dt_nccl_ctx_free: { parameters: ["pointer"], result: "i32" }, // int dt_nccl_ctx_free(void *ctx)
  // nccl_p2p.cu: a batch of point-to-point messages in one NCCL group, off or on the JS thread.
  dt_nccl_p2p: {
    parameters: [
      "pointer", // void *ctx
      "u64", // uint64_t n
      "buffer", // const int32_t *kinds
      "buffer", // const int32_t *peers
      "buffer", // void *const *bufs
      "buffer", // const uint64_t *counts
      "buffer", // const int32_t *dtypes
    ],
    result: "i32",
    nonblocking: true,
  },
  dt_nccl_p2p_blocking: {
    parameters: ["pointer", "u64", "buffer", "buffer", "buffer", "buffer", "buffer"], // (as dt_nccl_p2p)
    result: "i32",
  },
} as const satisfies Deno.ForeignLibraryInterface;

/** The functions of `libdtrain_cuda.so` (64-bit sizes take numbers: [Note: 64-bit integers]). */
export type CudaSymbols = Symbols<typeof symbols>;

/**
 * Opens `libdtrain_cuda.so` once per process, on first call: `DTRAIN_CUDA_LIB` if set, else
 * `build/`. Only the cuda device's runtime (src/tensor/device/cuda_runtime.ts) calls it; the NCCL
 * backend reaches the library through that runtime's `requireCuda`.
 *
 * @returns The library's functions.
 * @throws Error naming the paths tried and saying to run `make build` (with nvcc on PATH).
 */
export const loadCuda: () => CudaSymbols = lazyLibrary(
  "libdtrain_cuda.so",
  "DTRAIN_CUDA_LIB",
  symbols,
);

/**
 * Status codes of the kernels and runtime calls: libdtrain's `Status` (enum dt_status of
 * csrc/core/dtrain.h, whose `EDEVICE` only this library returns).
 */
export const CudaStatus: typeof Status = Status;

/**
 * The precision of matrix products (enum dt_matmul_precision in csrc/cuda/dtrain_cuda.h; [Note:
 * matmul precision] in csrc/cuda/matmul.cu).
 */
export const MatmulPrecision = { f32: 0, tf32: 1, bf16: 2 } as const;

/** The optional libraries `dt_cuda_library_available` asks about (enum dt_cuda_library). */
export const CudaLibrary = { cublas: 0, nccl: 1 } as const;

/** The symbol table itself, for tests/ffi/cuda_abi_test.ts (checked against csrc/cuda/dtrain_cuda.h). */
export { symbols as cudaSymbols };
