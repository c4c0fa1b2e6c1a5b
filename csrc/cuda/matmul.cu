/* Matrix products on cuBLAS (loaded at run time, libs.cu), with libdtrain's row-major prototypes.
 * A row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so every product calls
 * cuBLAS with the operands swapped and no copy.
 *
 * [Note: matmul precision]
 * Storage stays f32 everywhere (master weights, activations, gradients). The precision of the
 * products is a process-wide mode: "f32" (exact f32 products, the default), "tf32" (tensor cores
 * with 10-bit mantissas), or "bf16": each operand is rounded to bf16 into a scratch copy and
 * multiplied on the tensor cores with f32 accumulation and an f32 result, which is what
 * torch.autocast(dtype=bfloat16) does for matmuls and attention. */
#include <cuda_bf16.h>

#include "internal.cuh"
#include "libs.h"

static int precision = DT_MATMUL_PRECISION_F32;

/* Sets the precision of every later product (see [Note: matmul precision]). */
DT_EXPORT int dt_cuda_set_matmul_precision(int32_t mode) {
  CHECK(mode == DT_MATMUL_PRECISION_F32 || mode == DT_MATMUL_PRECISION_TF32 ||
            mode == DT_MATMUL_PRECISION_BF16,
        "cuda: matmul precision %d is not one of %d (f32), %d (tf32), %d (bf16)", mode,
        DT_MATMUL_PRECISION_F32, DT_MATMUL_PRECISION_TF32, DT_MATMUL_PRECISION_BF16);
  precision = mode;
  return DT_OK;
}

DT_EXPORT int32_t dt_cuda_get_matmul_precision(void) { return precision; }

int dt_cuda_blas(dt_cuda_device *dev, void **handle) {
  if (dev->blas == NULL) {
    const dt_cublas_api *api = dt_cublas();
    if (api == NULL) return DT_EUNSUPPORTED;
    cublasHandle_t h = NULL;
    int st = api->create(&h);
    if (st != CUBLAS_STATUS_SUCCESS)
      return dt_fail(DT_EDEVICE, "cublasCreate failed: %s", api->status_string(st));
    /* Without its stream the handle would run products on the legacy default stream, unordered
     * with the compute stream's kernels that make and read their operands. */
    st = api->set_stream(h, dev->compute);
    if (st != CUBLAS_STATUS_SUCCESS) {
      api->destroy(h);
      return dt_fail(DT_EDEVICE, "cublasSetStream to cuda:%d's compute stream failed: %s",
                     dt_cuda_current_index(), api->status_string(st));
    }
    dev->blas = h;
  }
  *handle = dev->blas;
  return DT_OK;
}

__global__ void to_bf16(const float *src, __nv_bfloat16 *dst, int64_t n) {
  GRID_LOOP(i, n) dst[i] = __float2bfloat16(src[i]);
}

/* Elements a row-major operand spans: its last row ends at (rows - 1) * ld + cols. */
static int64_t span(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  if (rows == 0 || cols == 0) return 0;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

static int fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

/* A bf16 copy of the `n` f32 elements at src in scratch (freed by the caller). */
static int bf16_copy(dt_cuda_device *dev, const float *src, int64_t n, void **out) {
  int st = dt_cuda_scratch(dev, n * 2, out);
  if (st != DT_OK) return st;
  GRID_LAUNCH(to_bf16, blocks_for(n), THREADS, 0, dev->compute)(src, (__nv_bfloat16 *)*out, n);
  LAUNCH_CHECK();
  return DT_OK;
}

/* batch products c_i = alpha * op(a_i) @ op(b_i) + beta * c_i, row-major, `s*` elements apart. */
int dt_cuda_gemm(dt_cuda_device *dev, int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, int64_t sa, const float *b, int64_t ldb,
                 int64_t sb, float beta, float *c, int64_t ldc, int64_t sc, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return DT_OK;
  CHECK(fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) && fits_int(ldb) &&
            fits_int(ldc) && fits_int(batch),
        "cuda matmul: a size above 2^31 (m=%lld n=%lld k=%lld batch=%lld)", (long long)m,
        (long long)n, (long long)k, (long long)batch);
  void *handle;
  int st = dt_cuda_blas(dev, &handle);
  if (st != DT_OK) return st;
  const dt_cublas_api *api = dt_cublas();
  const void *pa = a, *pb = b;
  void *ca = NULL, *cb = NULL;
  cudaDataType type = CUDA_R_32F;
  int compute =
      precision == DT_MATMUL_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (precision == DT_MATMUL_PRECISION_BF16 && k > 0) {
    type = CUDA_R_16BF;
    int64_t na = span(ta ? k : m, ta ? m : k, lda, batch, sa);
    int64_t nb = span(tb ? n : k, tb ? k : n, ldb, batch, sb);
    if ((st = bf16_copy(dev, a, na, &ca)) != DT_OK) return st;
    if ((st = bf16_copy(dev, b, nb, &cb)) != DT_OK) {
      dt_cuda_scratch_free(dev, ca);
      return st;
    }
    pa = ca;
    pb = cb;
  }
  int opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  int r;
  if (batch == 1) {
    r = api->gemm_ex(handle, opb, opa, (int)n, (int)m, (int)k, &alpha, pb, type, (int)ldb, pa,
                     type, (int)lda, &beta, c, CUDA_R_32F, (int)ldc, compute, CUBLAS_GEMM_DEFAULT);
  } else {
    r = api->gemm_strided_batched_ex(handle, opb, opa, (int)n, (int)m, (int)k, &alpha, pb, type,
                                     (int)ldb, sb, pa, type, (int)lda, sa, &beta, c, CUDA_R_32F,
                                     (int)ldc, sc, (int)batch, compute, CUBLAS_GEMM_DEFAULT);
  }
  if (ca) dt_cuda_scratch_free(dev, ca);
  if (cb) dt_cuda_scratch_free(dev, cb);
  if (r != CUBLAS_STATUS_SUCCESS)
    return dt_fail(DT_EDEVICE, "cuda matmul [%lld x %lld x %lld] x %lld: cuBLAS: %s",
                   (long long)m, (long long)n, (long long)k, (long long)batch,
                   api->status_string(r));
  return DT_OK;
}

static int check_gemm(const char *fn, const float *a, const float *b, const float *c, int64_t m,
                      int64_t n, int64_t k, int32_t ta, int32_t tb, int64_t lda, int64_t ldb,
                      int64_t ldc) {
  CHECK(a != NULL && b != NULL && c != NULL, "%s: NULL matrix", fn);
  CHECK(m >= 0 && n >= 0 && k >= 0, "%s: negative size m=%lld n=%lld k=%lld", fn, (long long)m,
        (long long)n, (long long)k);
  CHECK(lda >= (ta ? m : k) && lda >= 1, "%s: lda %lld too small", fn, (long long)lda);
  CHECK(ldb >= (tb ? k : n) && ldb >= 1, "%s: ldb %lld too small", fn, (long long)ldb);
  CHECK(ldc >= n && ldc >= 1, "%s: ldc %lld too small", fn, (long long)ldc);
  return DT_OK;
}

DT_EXPORT int dt_matmul(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k,
                        int32_t trans_a, int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc,
                        float alpha, float beta) {
  int st = check_gemm("dt_matmul", a, b, c, m, n, k, trans_a, trans_b, lda, ldb, ldc);
  if (st != DT_OK) return st;
  CURRENT(dev);
  return dt_cuda_gemm(dev, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc,
                      0, 1);
}

DT_EXPORT int dt_matmul_batched(const float *a, const float *b, float *c, int64_t batch,
                                int64_t stride_a, int64_t stride_b, int64_t stride_c, int64_t m,
                                int64_t n, int64_t k, int32_t trans_a, int32_t trans_b,
                                float alpha, float beta) {
  CHECK(batch >= 0, "dt_matmul_batched: negative batch %lld", (long long)batch);
  int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  int st = check_gemm("dt_matmul_batched", a, b, c, m, n, k, trans_a, trans_b, lda > 0 ? lda : 1,
                      ldb > 0 ? ldb : 1, n > 0 ? n : 1);
  if (st != DT_OK) return st;
  CURRENT(dev);
  return dt_cuda_gemm(dev, trans_a, trans_b, m, n, k, alpha, a, lda > 0 ? lda : 1, stride_a, b,
                      ldb > 0 ? ldb : 1, stride_b, beta, c, n > 0 ? n : 1, stride_c, batch);
}

/* y[r, :] = bias: the product then accumulates onto it (beta = 1). */
__global__ void fill_rows(float *y, const float *bias, int64_t rows, int64_t cols) {
  GRID_LOOP(i, rows * cols) y[i] = bias[i % cols];
}

DT_EXPORT int dt_linear_forward(const float *x, const float *w, const float *bias, float *y,
                                int64_t rows, int64_t in, int64_t out, int32_t w_trans,
                                int64_t ldw) {
  CHECK_PTR(x); CHECK_PTR(w); CHECK_PTR(y);
  int64_t ld_in = in > 1 ? in : 1, ld_out = out > 1 ? out : 1;
  int st = check_gemm("dt_linear_forward", x, w, y, rows, out, in, 0, !w_trans, ld_in, ldw, ld_out);
  if (st != DT_OK) return st;
  CURRENT(dev);
  if (rows == 0 || out == 0) return DT_OK;
  if (bias) {
    GRID_LAUNCH(fill_rows, blocks_for(rows * out), THREADS, 0, dev->compute)(y, bias, rows, out);
    LAUNCH_CHECK();
  }
  return dt_cuda_gemm(dev, 0, !w_trans, rows, out, in, 1.0f, x, ld_in, 0, w, ldw, 0,
                      bias ? 1.0f : 0.0f, y, ld_out, 0, 1);
}

DT_EXPORT int dt_linear_backward(const float *gy, const float *x, const float *w, float *gx,
                                 float *gw, float *gbias, int64_t rows, int64_t in, int64_t out,
                                 int32_t w_trans, int64_t ldw) {
  CHECK_PTR(gy); CHECK_PTR(x); CHECK_PTR(w);
  int64_t ld_in = in > 1 ? in : 1, ld_out = out > 1 ? out : 1;
  int st;
  if (gx && (st = check_gemm("dt_linear_backward", gy, w, gx, rows, in, out, 0, w_trans, ld_out,
                             ldw, ld_in)) != DT_OK)
    return st;
  if (gw && (st = check_gemm("dt_linear_backward", gy, x, gw, out, in, rows, 1, 0, ld_out, ld_in,
                             ld_in)) != DT_OK)
    return st;
  CURRENT(dev);
  /* gx[rows, in] = gy @ op(w); gw[out, in] = gy^T @ x; gbias = column sums of gy */
  if (gx && (st = dt_cuda_gemm(dev, 0, w_trans, rows, in, out, 1.0f, gy, ld_out, 0, w, ldw, 0,
                               0.0f, gx, ld_in, 0, 1)) != DT_OK)
    return st;
  if (gw && (st = dt_cuda_gemm(dev, 1, 0, out, in, rows, 1.0f, gy, ld_out, 0, x, ld_in, 0, 0.0f,
                               gw, ld_in, 0, 1)) != DT_OK)
    return st;
  if (gbias) return dt_sum_axis(gy, gbias, 1, rows, out, 1.0f);
  return DT_OK;
}
