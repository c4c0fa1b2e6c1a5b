/* dt_matmul_bf16's argument checks, written once for the CPU kernel (matmul_bf16.c) and the CUDA
 * one (csrc/cuda/matmul_bf16.cu), so that both refuse the same calls with the same messages. */
#ifndef DTRAIN_MATMUL_BF16_CHECK_H
#define DTRAIN_MATMUL_BF16_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain.h"

static inline int dt_check_matmul_bf16(const void *a, const void *b, const float *c, int64_t batch,
                                       int64_t stride_a, int64_t stride_b, int64_t stride_c,
                                       int64_t m, int64_t n, int64_t k, int32_t trans_a,
                                       int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc) {
  CHECK(a != NULL && b != NULL && c != NULL, "dt_matmul_bf16: NULL matrix");
  CHECK(batch >= 0 && m >= 0 && n >= 0 && k >= 0,
        "dt_matmul_bf16: negative size batch=%lld m=%lld n=%lld k=%lld", (long long)batch,
        (long long)m, (long long)n, (long long)k);
  CHECK(stride_a >= 0 && stride_b >= 0 && stride_c >= 0,
        "dt_matmul_bf16: negative stride %lld, %lld, %lld", (long long)stride_a,
        (long long)stride_b, (long long)stride_c);
  CHECK(lda >= (trans_a ? m : k) && lda >= 1, "dt_matmul_bf16: lda %lld too small", (long long)lda);
  CHECK(ldb >= (trans_b ? k : n) && ldb >= 1, "dt_matmul_bf16: ldb %lld too small", (long long)ldb);
  CHECK(ldc >= n && ldc >= 1, "dt_matmul_bf16: ldc %lld too small", (long long)ldc);
  return DT_OK;
}

#endif
