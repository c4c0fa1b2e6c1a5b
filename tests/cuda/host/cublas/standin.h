/* A CPU stand-in for cuBLAS, for the tests of the host build (csrc/cuda/host/: the CUDA runtime
 * over host memory, each cudaStream_t an in-order queue served by its own thread). A test that
 * sets DTRAIN_CUBLAS_LIB to build/cuda_host/libcublas_standin.so makes csrc/cuda/libs.cu dlopen
 * this library instead of libcublas; it is never shipped.
 *
 * It exports exactly the seven symbols libs.cu dlsyms (cublasCreate_v2, cublasDestroy_v2,
 * cublasSetStream_v2, cublasSetMathMode, cublasGemmEx, cublasGemmStridedBatchedEx,
 * cublasGetStatusString) with cuBLAS's ABI, and only the part of their behaviour dtrain uses:
 * f32 x f32 -> f32 products (CUBLAS_COMPUTE_32F or _32F_FAST_TF32) and bf16 x bf16 -> f32 products
 * (CUBLAS_COMPUTE_32F). Anything else is refused with the status cuBLAS gives for it, so a change
 * in how dtrain calls cuBLAS shows up here as an error rather than as a silently different result.
 *
 * cuBLAS's convention, which this library keeps exactly (gemm.cc):
 *  - Matrices are COLUMN-major: element (i, j) of a matrix with leading dimension ld is at
 *    p[i + j * ld], so ld is the distance between the starts of two columns and must be at least
 *    the number of rows (and at least 1).
 *  - C (m x n) = alpha * op(A) op(B) + beta * C, where op(A) is m x k and op(B) is k x n. With
 *    transa == CUBLAS_OP_N, A is stored m x k (lda >= max(1, m)); with CUBLAS_OP_T it is stored
 *    k x m (lda >= max(1, k)) and used transposed. Likewise B: k x n (ldb >= max(1, k)) or n x k
 *    (ldb >= max(1, n)); C always m x n with ldc >= max(1, m).
 *  - alpha and beta are read through host pointers (the default CUBLAS_POINTER_MODE_HOST) when the
 *    call is made, not when the product runs.
 *  - The strided batched form runs `batch` such products, the i-th on A + i * stride_a,
 *    B + i * stride_b and C + i * stride_c, strides counted in elements of each operand's type.
 * dtrain multiplies ROW-major matrices: a row-major X with leading dimension ld is the column-major
 * X^T with the same ld, so it computes the row-major C = op(A) op(B) as the column-major
 * C^T = op(B)^T op(A)^T, calling cublasGemmEx(transb, transa, n, m, k, B, ldb, A, lda, C, ldc)
 * with the operands swapped and no copy (csrc/cuda/matmul.cu, matmul_bf16.cu).
 *
 * Every product is queued on the handle's stream (stream_abi.h), never run on the caller's thread:
 * it must read its operands after the kernels queued before it have written them, and write C
 * before the kernels queued after it read it, as on a GPU. */
#pragma once

#include <stdint.h>

#include "../../../../csrc/cuda/host/stream_abi.h"

/* Our internals stay out of the library's dynamic symbol table; only the cuBLAS names are in it. */
#define STANDIN_HIDDEN __attribute__((visibility("hidden")))
#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

/* cublasStatus_t (cublas_api.h). */
enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
};

/* cublasOperation_t. CUBLAS_OP_C (conjugate transpose) is CUBLAS_OP_T for real matrices. */
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };

/* cublasMath_t: the two modes dtrain sets, the others cuBLAS knows, and the flag they may carry. */
enum {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_FP32_EMULATED_BF16X9_MATH = 4,     /* cuBLAS 12.9 */
  CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH = 8, /* cuBLAS 13 */
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
};

/* cublasComputeType_t: the two dtrain uses. */
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };

/* cublasGemmAlgo_t: the valid values are DEFAULT, ALGO0..ALGO23, DEFAULT_TENSOR_OP and
 * ALGO0_TENSOR_OP..ALGO15_TENSOR_OP; all of them compute the same product here. */
enum {
  CUBLAS_GEMM_DEFAULT = -1,
  CUBLAS_GEMM_ALGO23 = 23,
  CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
  CUBLAS_GEMM_ALGO15_TENSOR_OP = 115
};

/* cudaDataType (library_types.h): the three this library distinguishes. */
enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };

/* The ABI's types, without the CUDA headers: cublasHandle_t and cudaStream_t are pointers, and
 * cudaDataType, cublasComputeType_t and cublasGemmAlgo_t are C enums, passed as int. */
typedef void *cublasHandle_t;
typedef void *cudaStream_t;

/* What a cublasHandle_t points at. */
struct standin_handle {
  uint64_t magic; /* STANDIN_HANDLE_MAGIC while alive, 0 once destroyed */
  cudaStream_t stream; /* NULL (the legacy default stream) until cublasSetStream */
  int math_mode; /* recorded only: every product is exact f32 (gemm.cc) */
};

#define STANDIN_HANDLE_MAGIC 0x316e6964736c6274ULL /* "tblsdin1" */

/* The handle behind `handle`, or NULL when it is NULL or not a live handle of this library. */
STANDIN_HIDDEN standin_handle *standin_handle_of(cublasHandle_t handle);

/* Writes "cublas stand-in: <message>" to stderr: the refusals that only this stand-in makes (a
 * stream it cannot queue on) say why, since a status name alone would not. */
STANDIN_HIDDEN void standin_note(const char *format, ...) __attribute__((format(printf, 1, 2)));
