/* cublasGemmEx and cublasGemmStridedBatchedEx of the cuBLAS stand-in (standin.h explains the
 * column-major convention and why the work is queued), on OpenBLAS's cblas_sgemm.
 *
 * A call checks its arguments as cuBLAS does and answers at once; the product itself is a job
 * queued on the handle's stream with a copy of every argument (alpha and beta by value, as cuBLAS
 * reads host-mode scalars at the call), so it runs on the stream's thread after the kernels queued
 * before it. The job owns its memory and frees it when it has run.
 *
 * Precision: an f32 product is OpenBLAS's f32 sgemm whatever the compute type or math mode (so
 * CUBLAS_COMPUTE_32F_FAST_TF32 and CUBLAS_TF32_TENSOR_OP_MATH give f32 results, not TF32 ones). A
 * bf16 operand is widened to f32 first, which is exact (bf16 is the top half of an f32), and the
 * product accumulates in f32 as cuBLAS's CUBLAS_COMPUTE_32F does; only the order of the
 * additions may differ from a GPU's.
 *
 * As BLAS defines it: beta == 0 sets C to alpha * op(A) op(B) without reading C, so NaN or Inf
 * already in C does not survive; with k == 0 or alpha == 0 the result is beta * C and A and B are
 * not read. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

namespace {

/* One matrix operand as stored: rows x cols, column-major with leading dimension ld, the i-th of a
 * batch at base + i * stride elements. */
struct operand {
  const char *base;
  int type; /* CUDA_R_32F or CUDA_R_16BF */
  int rows, cols, ld;
  long long stride;
  float *packed; /* a bf16 operand's f32 copy, rows x cols with ld = rows; NULL for an f32 one */
};

struct gemm_job {
  void *stream;
  const dt_host_stream_ops *ops;
  CBLAS_TRANSPOSE ta, tb;
  int m, n, k, batch;
  float alpha, beta;
  operand a, b;
  float *c;
  int ldc;
  long long stride_c;
};

size_t type_size(int type) { return type == CUDA_R_16BF ? 2 : 4; }

/* The i-th matrix of `op` as f32, with its leading dimension in *ld: the operand itself when it is
 * f32; for bf16, its f32 copy, made now (on the stream's thread, after the kernels that wrote it).
 * bf16 is the high 16 bits of an f32, so widening is a shift and loses nothing. */
const float *operand_f32(const operand &op, int i, int *ld) {
  const char *p = op.base + (ptrdiff_t)((long long)i * op.stride * (long long)type_size(op.type));
  if (op.type == CUDA_R_32F) {
    *ld = op.ld;
    return (const float *)p;
  }
  const uint16_t *src = (const uint16_t *)p;
  for (int j = 0; j < op.cols; j++) {
    const uint16_t *col = src + (size_t)j * (size_t)op.ld;
    float *dst = op.packed + (size_t)j * (size_t)op.rows;
    for (int r = 0; r < op.rows; r++) {
      uint32_t bits = (uint32_t)col[r] << 16;
      memcpy(&dst[r], &bits, sizeof bits);
    }
  }
  *ld = op.rows > 1 ? op.rows : 1;
  return op.packed;
}

/* C = beta * C over the m x n matrix at c; beta == 0 writes zeros rather than multiplying, so that
 * NaN and Inf in C are overwritten (0 * NaN is NaN). */
void scale_c(float *c, int m, int n, int ldc, float beta) {
  if (beta == 1.0f) return;
  for (int j = 0; j < n; j++) {
    float *col = c + (size_t)j * (size_t)ldc;
    if (beta == 0.0f) {
      memset(col, 0, (size_t)m * sizeof(float));
    } else {
      for (int r = 0; r < m; r++) col[r] *= beta;
    }
  }
}

/* Runs on the stream's thread: every product of the batch, in order (so a batch whose C stride is
 * 0 accumulates deterministically, where cuBLAS would race), then frees the job. */
void run_gemm(void *arg) {
  gemm_job *job = (gemm_job *)arg;
  for (int i = 0; i < job->batch; i++) {
    float *c = job->c + (ptrdiff_t)((long long)i * job->stride_c);
    if (job->k == 0 || job->alpha == 0.0f) {
      scale_c(c, job->m, job->n, job->ldc, job->beta);
      continue;
    }
    /* Zeroing first keeps beta == 0 independent of how OpenBLAS treats it. */
    if (job->beta == 0.0f) scale_c(c, job->m, job->n, job->ldc, 0.0f);
    int lda, ldb;
    const float *a = operand_f32(job->a, i, &lda);
    const float *b = operand_f32(job->b, i, &ldb);
    cblas_sgemm(CblasColMajor, job->ta, job->tb, job->m, job->n, job->k, job->alpha, a, lda, b,
                ldb, job->beta, c, job->ldc);
  }
  free(job->a.packed);
  free(job->b.packed);
  free(job);
}

int max1(int v) { return v > 1 ? v : 1; }

bool valid_op(int op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

bool valid_algo(int algo) {
  return (algo >= CUBLAS_GEMM_DEFAULT && algo <= CUBLAS_GEMM_ALGO23) ||
         (algo >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
}

/* The type combinations dtrain uses: f32 x f32 -> f32 with f32 or fast-TF32 compute (matmul.cu),
 * bf16 x bf16 -> f32 with f32 compute (matmul_bf16.cu, and matmul.cu's "bf16" precision). cuBLAS
 * supports many more; a call with any other is refused as not supported. */
bool supported_types(int atype, int btype, int ctype, int compute) {
  if (ctype != CUDA_R_32F || atype != btype) return false;
  if (atype == CUDA_R_32F)
    return compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  return atype == CUDA_R_16BF && compute == CUBLAS_COMPUTE_32F;
}

/* An f32 copy's buffer for a bf16 operand of a product that reads it. */
bool alloc_packed(operand *op) {
  op->packed = NULL;
  if (op->type != CUDA_R_16BF) return true;
  op->packed = (float *)malloc((size_t)op->rows * (size_t)op->cols * sizeof(float));
  return op->packed != NULL;
}

/* Both entry points: cublasGemmEx is a batch of one. */
int gemm(cublasHandle_t handle, int transa, int transb, int m, int n, int k, const void *alpha,
         const void *a, int atype, int lda, long long stride_a, const void *b, int btype, int ldb,
         long long stride_b, const void *beta, void *c, int ctype, int ldc, long long stride_c,
         int batch, int compute, int algo, const char *fn) {
  standin_handle *h = standin_handle_of(handle);
  if (h == NULL) return CUBLAS_STATUS_NOT_INITIALIZED;

  /* cuBLAS's invalid values: operations, sizes, and leading dimensions below the stored rows of
   * each column-major operand (A is m x k, or k x m when transposed; B k x n, or n x k). */
  if (!valid_op(transa) || !valid_op(transb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  int a_rows = ta ? k : m, a_cols = ta ? m : k;
  int b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (lda < max1(a_rows) || ldb < max1(b_rows) || ldc < max1(m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (alpha == NULL || beta == NULL || !valid_algo(algo)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported_types(atype, btype, ctype, compute)) return CUBLAS_STATUS_NOT_SUPPORTED;

  /* The stream is checked before an empty product returns, so that a handle without one fails at
   * its first product, empty or not. */
  const dt_host_stream_ops *ops = h->stream != NULL ? dt_host_stream_table(h->stream) : NULL;
  if (ops == NULL) {
    if (h->stream == NULL)
      standin_note("%s on a handle without a stream: the default stream cannot be queued on "
                   "(set one with cublasSetStream)",
                   fn);
    else
      standin_note("%s: stream %p is not a host build's stream", fn, h->stream);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS; /* nothing to write */

  /* The stand-in's own check: cuBLAS would fault on the device at a NULL operand; here it would
   * crash the stream's thread, so it is refused at the call instead. */
  float alpha_v = *(const float *)alpha, beta_v = *(const float *)beta;
  bool reads_ab = k > 0 && alpha_v != 0.0f;
  if (c == NULL || (reads_ab && (a == NULL || b == NULL))) return CUBLAS_STATUS_INVALID_VALUE;

  gemm_job *job = (gemm_job *)calloc(1, sizeof *job);
  if (job == NULL) return CUBLAS_STATUS_ALLOC_FAILED;
  job->stream = h->stream;
  job->ops = ops;
  job->ta = ta ? CblasTrans : CblasNoTrans;
  job->tb = tb ? CblasTrans : CblasNoTrans;
  job->m = m;
  job->n = n;
  job->k = k;
  job->batch = batch;
  job->alpha = alpha_v;
  job->beta = beta_v;
  job->a = operand{(const char *)a, atype, a_rows, a_cols, lda, stride_a, NULL};
  job->b = operand{(const char *)b, btype, b_rows, b_cols, ldb, stride_b, NULL};
  job->c = (float *)c;
  job->ldc = ldc;
  job->stride_c = stride_c;
  /* The f32 copies of bf16 operands are allocated now, so that running out of memory is this
   * call's ALLOC_FAILED rather than a failure on the stream's thread. */
  if (reads_ab && (!alloc_packed(&job->a) || !alloc_packed(&job->b))) {
    free(job->a.packed);
    free(job);
    return CUBLAS_STATUS_ALLOC_FAILED;
  }
  if (ops->enqueue(h->stream, run_gemm, job) != 0) {
    /* The stream's device has failed (a faulting kernel before us): the job stays ours. */
    free(job->a.packed);
    free(job->b.packed);
    free(job);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

STANDIN_EXPORT int cublasGemmEx(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                                const void *alpha, const void *a, int atype, int lda,
                                const void *b, int btype, int ldb, const void *beta, void *c,
                                int ctype, int ldc, int compute, int algo) {
  return gemm(handle, transa, transb, m, n, k, alpha, a, atype, lda, 0, b, btype, ldb, 0, beta, c,
              ctype, ldc, 0, 1, compute, algo, "cublasGemmEx");
}

STANDIN_EXPORT int cublasGemmStridedBatchedEx(cublasHandle_t handle, int transa, int transb, int m,
                                              int n, int k, const void *alpha, const void *a,
                                              int atype, int lda, long long stride_a,
                                              const void *b, int btype, int ldb,
                                              long long stride_b, const void *beta, void *c,
                                              int ctype, int ldc, long long stride_c, int batch,
                                              int compute, int algo) {
  return gemm(handle, transa, transb, m, n, k, alpha, a, atype, lda, stride_a, b, btype, ldb,
              stride_b, beta, c, ctype, ldc, stride_c, batch, compute, algo,
              "cublasGemmStridedBatchedEx");
}
