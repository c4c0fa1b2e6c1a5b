/* The cuBLAS stand-in's handles (see standin.h for what the library is and why): create, destroy,
 * the stream products are queued on, the math mode, and the status names. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "standin.h"

standin_handle *standin_handle_of(cublasHandle_t handle) {
  standin_handle *h = (standin_handle *)handle;
  return h != NULL && h->magic == STANDIN_HANDLE_MAGIC ? h : NULL;
}

void standin_note(const char *format, ...) {
  char line[512];
  va_list ap;
  va_start(ap, format);
  vsnprintf(line, sizeof line, format, ap);
  va_end(ap);
  fprintf(stderr, "cublas stand-in: %s\n", line);
}

/* As cuBLAS: the new handle runs products on the legacy default stream (NULL) in the default math
 * mode until told otherwise. Here the NULL stream cannot be queued on (stream_abi.h), so a product
 * on a handle whose stream was never set is refused (gemm.cc); dtrain always sets it
 * (dt_cuda_blas in csrc/cuda/matmul.cu). */
STANDIN_EXPORT int cublasCreate_v2(cublasHandle_t *handle) {
  if (handle == NULL) return CUBLAS_STATUS_INVALID_VALUE;
  standin_handle *h = (standin_handle *)calloc(1, sizeof *h);
  if (h == NULL) return CUBLAS_STATUS_ALLOC_FAILED;
  h->magic = STANDIN_HANDLE_MAGIC;
  h->stream = NULL;
  h->math_mode = CUBLAS_DEFAULT_MATH;
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

/* Products already queued do not refer to their handle (each carries a copy of its arguments), so
 * the handle can go while they are still pending, as cuBLAS allows. */
STANDIN_EXPORT int cublasDestroy_v2(cublasHandle_t handle) {
  standin_handle *h = standin_handle_of(handle);
  if (h == NULL) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->magic = 0;
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}

/* NULL is accepted as cuBLAS accepts it (back to the default stream), and the products refused
 * until a real stream is set. A non-NULL stream that is not a host build's is refused here, where
 * the mistake is made: cuBLAS would take it, but the stand-in has no way to queue work on it and
 * must never run a product on the caller's thread instead. */
STANDIN_EXPORT int cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  standin_handle *h = standin_handle_of(handle);
  if (h == NULL) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream != NULL && dt_host_stream_table(stream) == NULL) {
    standin_note("cublasSetStream: stream %p is not a host build's stream (stream_abi.h); only "
                 "those can be queued on",
                 stream);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  h->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

/* dtrain sets CUBLAS_DEFAULT_MATH or CUBLAS_TF32_TENSOR_OP_MATH; both are accepted and only
 * recorded, since every product here is computed in exact f32: a TF32 product on a GPU rounds its
 * operands to 10-bit mantissas, the stand-in does not, so in the host build dtrain's "tf32"
 * matmul precision gives the "f32" results (a test must not expect TF32 rounding from it). The
 * other modes cuBLAS knows are refused as not supported; values it does not know, as invalid. */
STANDIN_EXPORT int cublasSetMathMode(cublasHandle_t handle, int mode) {
  standin_handle *h = standin_handle_of(handle);
  if (h == NULL) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == CUBLAS_DEFAULT_MATH || mode == CUBLAS_TF32_TENSOR_OP_MATH) {
    h->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
  }
  int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  switch (base) {
  case CUBLAS_DEFAULT_MATH:
  case CUBLAS_TENSOR_OP_MATH:
  case CUBLAS_PEDANTIC_MATH:
  case CUBLAS_TF32_TENSOR_OP_MATH:
  case CUBLAS_FP32_EMULATED_BF16X9_MATH:
  case CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  default:
    return CUBLAS_STATUS_INVALID_VALUE;
  }
}

/* cuBLAS's own names for its statuses, which dtrain puts in its error messages; "<unknown>" for a
 * value that is not one, as cuBLAS answers. */
STANDIN_EXPORT const char *cublasGetStatusString(int status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  default: return "<unknown>";
  }
}
