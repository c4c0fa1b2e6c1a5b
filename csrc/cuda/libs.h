/* cuBLAS and NCCL as this library sees them: our own declarations of the few functions we call,
 * resolved with dlopen/dlsym at run time (libs.cu), so that libdtrain_cuda.so links to neither
 * and loads on a machine that lacks them. The enum values are those of cublas_api.h and nccl.h
 * (stable across cuBLAS 12/13 and NCCL 2.x). */
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>
#include <stddef.h>

/* ---------------------------------------------------------------- cuBLAS */

typedef void *cublasHandle_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum { CUBLAS_GEMM_DEFAULT = -1 };

typedef struct {
  int (*create)(cublasHandle_t *handle);
  int (*destroy)(cublasHandle_t handle);
  int (*set_stream)(cublasHandle_t handle, cudaStream_t stream);
  int (*set_math_mode)(cublasHandle_t handle, int mode);
  int (*gemm_ex)(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                 const void *alpha, const void *a, cudaDataType atype, int lda, const void *b,
                 cudaDataType btype, int ldb, const void *beta, void *c, cudaDataType ctype,
                 int ldc, int compute, int algo);
  int (*gemm_strided_batched_ex)(cublasHandle_t handle, int transa, int transb, int m, int n,
                                 int k, const void *alpha, const void *a, cudaDataType atype,
                                 int lda, long long stride_a, const void *b, cudaDataType btype,
                                 int ldb, long long stride_b, const void *beta, void *c,
                                 cudaDataType ctype, int ldc, long long stride_c, int batch,
                                 int compute, int algo);
  const char *(*status_string)(int status);
} dt_cublas_api;

/* cuBLAS, loaded on first call; NULL with the paths tried in dt_last_error when not found. */
const dt_cublas_api *dt_cublas(void);

/* ---------------------------------------------------------------- NCCL */

typedef void *ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;
enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
};
enum { ncclUint8 = 1, ncclInt32 = 2, ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 };
enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

typedef struct {
  int (*get_unique_id)(ncclUniqueId *id);
  int (*comm_init_rank)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
  int (*comm_destroy)(ncclComm_t comm);
  int (*comm_abort)(ncclComm_t comm);
  int (*comm_get_async_error)(ncclComm_t comm, int *result);
  int (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op,
                    ncclComm_t comm, cudaStream_t stream);
  int (*broadcast)(const void *send, void *recv, size_t count, int dtype, int root,
                   ncclComm_t comm, cudaStream_t stream);
  int (*all_gather)(const void *send, void *recv, size_t count, int dtype, ncclComm_t comm,
                    cudaStream_t stream);
  int (*reduce_scatter)(const void *send, void *recv, size_t count, int dtype, int op,
                        ncclComm_t comm, cudaStream_t stream);
  int (*send)(const void *buf, size_t count, int dtype, int peer, ncclComm_t comm,
              cudaStream_t stream);
  int (*recv)(void *buf, size_t count, int dtype, int peer, ncclComm_t comm, cudaStream_t stream);
  int (*group_start)(void);
  int (*group_end)(void);
  const char *(*error_string)(int result);
  const char *(*last_error)(ncclComm_t comm);
  int (*get_version)(int *version);
} dt_nccl_api;

/* NCCL, loaded on first call; NULL with the paths tried in dt_last_error when not found. */
const dt_nccl_api *dt_nccl(void);
