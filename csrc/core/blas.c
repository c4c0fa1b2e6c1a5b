/* Matrix products: OpenBLAS's cblas_sgemm is the engine, never a hand-written loop. */
#include <cblas.h>

#include "dtrain.h"

/* c[m,n] = alpha * op(a) @ op(b) + beta * c, row-major. op(a) is [m,k]: a is stored [m,k] with
 * lda >= k, or [k,m] with lda >= m when trans_a. Likewise op(b) is [k,n]. */
int dt_matmul(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k,
              int32_t trans_a, int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc, float alpha,
              float beta) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(c);
  CHECK(m >= 0 && n >= 0 && k >= 0, "dt_matmul: negative size m=%lld n=%lld k=%lld", (long long)m,
        (long long)n, (long long)k);
  CHECK(lda >= (trans_a ? m : k) && lda >= 1, "dt_matmul: lda %lld too small", (long long)lda);
  CHECK(ldb >= (trans_b ? k : n) && ldb >= 1, "dt_matmul: ldb %lld too small", (long long)ldb);
  CHECK(ldc >= n && ldc >= 1, "dt_matmul: ldc %lld too small", (long long)ldc);
  if (m == 0 || n == 0) return DT_OK;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
  return DT_OK;
}

/* Batched product: `batch` independent products with element strides between consecutive
 * matrices (a stride of 0 reuses one matrix for every batch). */
int dt_matmul_batched(const float *a, const float *b, float *c, int64_t batch, int64_t stride_a,
                      int64_t stride_b, int64_t stride_c, int64_t m, int64_t n, int64_t k,
                      int32_t trans_a, int32_t trans_b, float alpha, float beta) {
  CHECK(batch >= 0, "dt_matmul_batched: negative batch %lld", (long long)batch);
  for (int64_t i = 0; i < batch; i++) {
    int status = dt_matmul(a + i * stride_a, b + i * stride_b, c + i * stride_c, m, n, k, trans_a,
                           trans_b, trans_a ? m : k, trans_b ? k : n, n, alpha, beta);
    if (status != DT_OK) return status;
  }
  return DT_OK;
}

void dt_set_num_threads(int32_t n) { openblas_set_num_threads(n > 0 ? n : 1); }
int32_t dt_get_num_threads(void) { return openblas_get_num_threads(); }
