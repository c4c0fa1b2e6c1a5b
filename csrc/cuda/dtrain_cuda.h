/* The C ABI of libdtrain_cuda.so beyond libdtrain's kernels (which csrc/core/dtrain.h declares for
 * both libraries): the CUDA runtime entry points and the NCCL shim, as ffi/cuda.ts calls them.
 * Every .cu file that defines one includes this header, so the compiler checks each definition
 * against its declaration, and tests/ffi/cuda_abi_test.ts checks ffi/cuda.ts against it. Runtime
 * calls return a dt_status (its message from dt_last_error); NCCL calls return the collective
 * codes of csrc/gloo/collective_codes.h, their message read with dt_nccl_last_error. */
#ifndef DTRAIN_CUDA_H
#define DTRAIN_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The numbers of this ABI beyond csrc/core/dtrain.h's, as ffi/cuda.ts numbers them
 * (tests/ffi/enums_test.ts holds each pair). */

/* The precision of matrix products (matmul.cu, [Note: matmul precision]; MatmulPrecision). */
enum dt_matmul_precision {
  DT_MATMUL_PRECISION_F32 = 0, DT_MATMUL_PRECISION_TF32 = 1, DT_MATMUL_PRECISION_BF16 = 2
};
/* The optional libraries dt_cuda_library_available asks about (CudaLibrary). */
enum dt_cuda_library { DT_CUDA_LIBRARY_CUBLAS = 0, DT_CUDA_LIBRARY_NCCL = 1 };

/* ---------------------------------------------------------------- runtime.cu */

/* The number of usable GPUs; an error saying what is missing (no driver, no device) when none. */
int dt_cuda_device_count(int32_t *count);
int dt_cuda_device_name(int32_t index, char *buf, int64_t len);
/* Makes `index` the calling thread's device, setting it up on first use. */
int dt_cuda_use_device(int32_t index);
int dt_cuda_synchronize(void);
int dt_cuda_copy_in(void *dst, const void *src, int64_t nbytes);
int dt_cuda_copy_out(void *dst, const void *src, int64_t nbytes);
int dt_cuda_mem_info(int64_t *free_bytes, int64_t *total_bytes);

/* ---------------------------------------------------------------- alloc.cu */

int64_t dt_cuda_allocated_bytes_on(int32_t index);

/* ---------------------------------------------------------------- pinned.cu */

/* n copies from host memory through the pinned ring: the DataLoader's pinMemory path. */
int dt_cuda_copy_in_pinned(int32_t n, void *const *dsts, const void *const *srcs,
                           const int64_t *nbytes);
int64_t dt_cuda_pinned_bytes(int32_t index);

/* ---------------------------------------------------------------- matmul.cu, libs.cu */

/* mode: enum dt_matmul_precision. */
int dt_cuda_set_matmul_precision(int32_t mode);
int32_t dt_cuda_get_matmul_precision(void);
/* Whether cuBLAS or NCCL (enum dt_cuda_library) can be opened, with the reason in dt_last_error
 * when not. */
int dt_cuda_library_available(int32_t which);

/* ---------------------------------------------------------------- nccl.cu */

int dt_nccl_unique_id(uint8_t *out);
int dt_nccl_ctx_new(int32_t device, int32_t rank, int32_t size, const int32_t *global_ranks,
                    int64_t timeout_ms, void **out);
int dt_nccl_connect(void *handle, const uint8_t *id);
int dt_nccl_last_error(void *handle, char *buf, int64_t len);
int dt_nccl_mark(void *handle);
int dt_nccl_allreduce(void *handle, void *buf, uint64_t count, int32_t dtype, int32_t op);
int dt_nccl_broadcast(void *handle, void *buf, uint64_t count, int32_t dtype, int32_t root);
int dt_nccl_allgather(void *handle, const void *in, uint64_t count, int32_t dtype,
                      void *const *outs, uint64_t nouts);
int dt_nccl_allgather_blocking(void *handle, const void *in, uint64_t count, int32_t dtype,
                               void *const *outs, uint64_t nouts);
int dt_nccl_reduce_scatter(void *handle, void *out, const void *in, uint64_t out_count,
                           int32_t dtype, int32_t op);
int dt_nccl_allreduce_blocking(void *handle, void *buf, uint64_t count, int32_t dtype, int32_t op);
int dt_nccl_reduce_scatter_blocking(void *handle, void *out, const void *in, uint64_t out_count,
                                    int32_t dtype, int32_t op);
int dt_nccl_barrier(void *handle);
int dt_nccl_ctx_free(void *handle);

/* ---------------------------------------------------------------- nccl_p2p.cu */
/* `n` point-to-point messages in one NCCL group: message i sends (kinds[i] 0) or receives (1)
 * counts[i] elements of dtypes[i] at bufs[i] to or from group rank peers[i]. */
int dt_nccl_p2p(void *handle, uint64_t n, const int32_t *kinds, const int32_t *peers,
                void *const *bufs, const uint64_t *counts, const int32_t *dtypes);
/* dt_nccl_p2p on the calling thread, leaving its current device as it was. */
int dt_nccl_p2p_blocking(void *handle, uint64_t n, const int32_t *kinds, const int32_t *peers,
                         void *const *bufs, const uint64_t *counts, const int32_t *dtypes);

#ifdef __cplusplus
}
#endif

#endif
