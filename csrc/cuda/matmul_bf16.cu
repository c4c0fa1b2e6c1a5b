/* Products of bf16 matrices with an f32 result (dtrain.h's dt_matmul_bf16) on cuBLAS (loaded at
 * run time, libs.cu): cublasGemmEx / cublasGemmStridedBatchedEx with CUDA_R_16BF operands, an
 * CUDA_R_32F result and f32 compute, the tensor cores' bf16 products. As in matmul.cu, the
 * row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: operands swapped, no copy. */
#include <stdio.h>

#include "internal.cuh"
#include "libs.h"
#include "../core/matmul_bf16_check.h"

static int fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

DT_EXPORT int dt_matmul_bf16(const void *a, const void *b, float *c, int64_t batch,
                             int64_t stride_a, int64_t stride_b, int64_t stride_c, int64_t m,
                             int64_t n, int64_t k, int32_t trans_a, int32_t trans_b, int64_t lda,
                             int64_t ldb, int64_t ldc, float alpha, float beta) {
  int checked = dt_check_matmul_bf16(a, b, c, batch, stride_a, stride_b, stride_c, m, n, k, trans_a,
                                     trans_b, lda, ldb, ldc);
  if (checked != DT_OK) return checked;
  CHECK(fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) && fits_int(ldb) &&
            fits_int(ldc) && fits_int(batch),
        "dt_matmul_bf16: a size above 2^31 (m=%lld n=%lld k=%lld batch=%lld)", (long long)m,
        (long long)n, (long long)k, (long long)batch);
  CURRENT(dev);
  if (batch == 0 || m == 0 || n == 0) return DT_OK;
  void *handle;
  int st = dt_cuda_blas(dev, &handle);
  if (st != DT_OK) return st;
  const dt_cublas_api *api = dt_cublas();
  int opa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  int r;
  if (batch == 1) {
    r = api->gemm_ex(handle, opb, opa, (int)n, (int)m, (int)k, &alpha, b, CUDA_R_16BF, (int)ldb,
                     a, CUDA_R_16BF, (int)lda, &beta, c, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
  } else if (stride_c == 0) {
    /* One c for every product: cuBLAS's batch would write it concurrently; the products run in
     * turn, as the CPU's dt_matmul_batched runs them. */
    const uint16_t *ha = (const uint16_t *)a, *hb = (const uint16_t *)b;
    r = CUBLAS_STATUS_SUCCESS;
    for (int64_t i = 0; i < batch && r == CUBLAS_STATUS_SUCCESS; i++) {
      r = api->gemm_ex(handle, opb, opa, (int)n, (int)m, (int)k, &alpha, hb + i * stride_b,
                       CUDA_R_16BF, (int)ldb, ha + i * stride_a, CUDA_R_16BF, (int)lda, &beta,
                       c, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
  } else {
    r = api->gemm_strided_batched_ex(handle, opb, opa, (int)n, (int)m, (int)k, &alpha, b,
                                     CUDA_R_16BF, (int)ldb, stride_b, a, CUDA_R_16BF, (int)lda,
                                     stride_a, &beta, c, CUDA_R_32F, (int)ldc, stride_c,
                                     (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  if (r != CUBLAS_STATUS_SUCCESS)
    return dt_fail(DT_EDEVICE, "cuda matmul_bf16 [%lld x %lld x %lld] x %lld: cuBLAS: %s",
                   (long long)m, (long long)n, (long long)k, (long long)batch,
                   api->status_string(r));
  return DT_OK;
}

DT_EXPORT int32_t dt_matmul_bf16_backend(char *buf, int64_t len) {
  if (buf != NULL && len > 0)
    snprintf(buf, (size_t)len, "cuBLAS cublasGemmEx, bf16 inputs with f32 compute and result");
  return 2;
}
