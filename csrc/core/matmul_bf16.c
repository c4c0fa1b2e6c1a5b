/* Products of bf16 matrices with an f32 result (dt_matmul_bf16), on one of two engines chosen
 * once, on first use, and reported by dt_matmul_bf16_backend:
 *   onednn     oneDNN's matmul primitive (onednn.c), where the CPU has avx512_bf16 or amx_bf16,
 *              libdnnl.so.2 loads and a probe product gives the right answer;
 *   f32-sgemm  elsewhere: each block of the product converts the bf16 panels it reads to f32 and
 *              multiplies them with OpenBLAS's sgemm. The blocks are cut as dt_matmul cuts them
 *              (matmul.c), so the result is bit for bit dt_matmul's on the f32 values of the
 *              operands, without the whole f32 copies of both operands that upcasting first makes.
 * DTRAIN_BF16_GEMM=auto|onednn|f32 forces an engine; a forced oneDNN that cannot run fails every
 * product with the reason. */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "gemm_cut.h"
#include "half_math.h"
#include "matmul_bf16_check.h"
#include "onednn.h"

enum { ENGINE_F32 = 0, ENGINE_ONEDNN = 1, ENGINE_NONE = -1 };
static int engine = ENGINE_NONE;
static char reason[320];
static pthread_once_t chosen = PTHREAD_ONCE_INIT;

static void choose(void) {
  const char *force = getenv("DTRAIN_BF16_GEMM");
  char why[256] = "";
  if (force == NULL || *force == 0 || strcmp(force, "auto") == 0) {
    if (onednn_open(why, sizeof why) == DT_OK) {
      engine = ENGINE_ONEDNN;
      snprintf(reason, sizeof reason, "%s", why);
    } else {
      engine = ENGINE_F32;
      snprintf(reason, sizeof reason, "bf16 panels converted to f32 for OpenBLAS's sgemm: %s", why);
    }
  } else if (strcmp(force, "f32") == 0) {
    engine = ENGINE_F32;
    snprintf(reason, sizeof reason, "bf16 panels converted to f32 for OpenBLAS's sgemm: DTRAIN_BF16_GEMM=f32");
  } else if (strcmp(force, "onednn") == 0) {
    if (onednn_open(why, sizeof why) == DT_OK) {
      engine = ENGINE_ONEDNN;
      snprintf(reason, sizeof reason, "%s (DTRAIN_BF16_GEMM=onednn)", why);
    } else {
      snprintf(reason, sizeof reason, "DTRAIN_BF16_GEMM=onednn, but oneDNN cannot run: %s", why);
    }
  } else {
    snprintf(reason, sizeof reason, "DTRAIN_BF16_GEMM=%.64s is not one of auto, onednn, f32", force);
  }
}

int32_t dt_matmul_bf16_backend(char *buf, int64_t len) {
  pthread_once(&chosen, choose);
  if (buf != NULL && len > 0) snprintf(buf, (size_t)len, "%s", reason);
  return engine;
}

/* ---------------------------------------------------------------- f32 products of bf16 values */

/* The blocks are matmul.c's (gemm_cut.h): the same blocks make the same sgemm calls, hence
 * dt_matmul's bits. */
/* A block converts the whole of the operand it shares with the others; above this many elements
 * it does so in chunks of the other output dimension, to bound its scratch. */
#define SHARED_MAX_ELEMENTS (1 << 20)

/* Each thread keeps its conversion scratch between products (up to this many bytes): a fresh
 * block of megabytes from malloc is a fresh mapping, and faulting its pages in cost more than the
 * conversion (a 64x1536 @ 1536x384 product took 1.5x the upcast-first time). The block is a
 * thread-local that the pool's workers free when they stop (dt_release_thread_scratch, from
 * parallel.c). No pthread-key destructor: the runtime may unload libdtrain before its threads end,
 * and a destructor left in unmapped code crashed the process at exit. A calling thread that is not
 * a pool worker (the JavaScript thread) keeps its block until the process ends. */
#define SCRATCH_KEEP_BYTES ((size_t)32 << 20)
static _Thread_local struct {
  float *data;
  size_t bytes;
} scratch;

__attribute__((visibility("hidden"))) void dt_release_thread_scratch(void) {
  onednn_release_thread_scratch();
  free(scratch.data);
  scratch.data = NULL;
  scratch.bytes = 0;
}

/* `bytes` of scratch: the thread's kept block, or (beyond the kept size) a block the caller frees
 * (*owned set). NULL when out of memory. */
static float *scratch_get(size_t bytes, int *owned) {
  *owned = bytes > SCRATCH_KEEP_BYTES;
  if (*owned) return malloc(bytes);
  if (scratch.bytes < bytes) {
    dt_release_thread_scratch();
    if ((scratch.data = malloc(bytes)) == NULL) return NULL;
    scratch.bytes = bytes;
  }
  return scratch.data;
}

typedef struct {
  const uint16_t *a, *b;
  float *c;
  int64_t m, n, k, lda, ldb, ldc;
  int32_t trans_a, trans_b;
  float alpha, beta;
  int parts, by_columns;
  int status; /* DT_ENOMEM when a block found no scratch */
} bgemm_t;

/* dst[rows, cols] (packed) = the f32 values of src[rows, cols] with leading dimension ld. */
static void widen(float *restrict dst, const uint16_t *restrict src, int64_t rows, int64_t cols,
                  int64_t ld) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < cols; j++) dst[r * cols + j] = dt_bf16_to_f32(src[r * ld + j]);
}

/* op(a)'s rows r0..r1 as packed f32: a's rows, or a's columns when transposed (a stored [k, m]). */
static void widen_a(const bgemm_t *g, float *dst, int64_t r0, int64_t r1) {
  if (g->trans_a) widen(dst, g->a + r0, g->k, r1 - r0, g->lda);
  else widen(dst, g->a + r0 * g->lda, r1 - r0, g->k, g->lda);
}

/* op(b)'s columns c0..c1 as packed f32: b's columns, or b's rows when transposed (b stored [n, k]). */
static void widen_b(const bgemm_t *g, float *dst, int64_t c0, int64_t c1) {
  if (g->trans_b) widen(dst, g->b + c0 * g->ldb, c1 - c0, g->k, g->ldb);
  else widen(dst, g->b + c0, g->k, c1 - c0, g->ldb);
}

/* c[r0:r1, c0:c1] of g from the converted rows fa of op(a) and columns fb of op(b). */
static void sgemm_part(const bgemm_t *g, const float *fa, const float *fb, int64_t r0, int64_t r1,
                       int64_t c0, int64_t c1) {
  int64_t mb = r1 - r0, nb = c1 - c0, k = g->k;
  int64_t lda = g->trans_a ? mb : k, ldb = g->trans_b ? k : nb;
  cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
              g->trans_b ? CblasTrans : CblasNoTrans, (blasint)mb, (blasint)nb, (blasint)k,
              g->alpha, fa, (blasint)(lda > 0 ? lda : 1), fb, (blasint)(ldb > 0 ? ldb : 1),
              g->beta, g->c + r0 * g->ldc + c0, (blasint)g->ldc);
}

/* Block `part` of the product, as matmul.c's gemm_block cuts it. The block converts its own rows
 * (or columns) whole: cutting them finer, into panels that would stay in cache, changed OpenBLAS's
 * sums (a 64x384 @ 384x1536 product in 176-column panels differed from dt_matmul in last bits)
 * and was no faster here. */
static void run_part(void *ctx, int64_t part) {
  bgemm_t *g = ctx;
  int64_t dim = g->by_columns ? g->n : g->m, other = g->by_columns ? g->m : g->n, k = g->k;
  int64_t start, end;
  gemm_cut_block(dim, (int)part, g->parts, &start, &end);
  if (start == end) return;
  int64_t chunk = other, own_size = end - start;
  /* Only products beyond SHARED_MAX_ELEMENTS are cut more finely than dt_matmul cuts them: their
   * bits are dt_matmul's where OpenBLAS's sums do not depend on the cut (the test's 270 x 260 x
   * 4096 product in chunks of 256 columns kept them), not by construction. */
  if (other * k > SHARED_MAX_ELEMENTS) {
    chunk = SHARED_MAX_ELEMENTS / (k > 0 ? k : 1);
    chunk = chunk < 256 ? 256 : chunk / BLOCK_ALIGN * BLOCK_ALIGN;
  }
  int owned;
  float *shared = scratch_get((size_t)((chunk + own_size) * k + 1) * sizeof(float), &owned);
  if (shared == NULL) {
    __atomic_store_n(&g->status, DT_ENOMEM, __ATOMIC_RELAXED);
    return;
  }
  float *own = shared + chunk * k;
  if (g->by_columns) widen_b(g, own, start, end);
  else widen_a(g, own, start, end);
  for (int64_t o = 0; o < other; o += chunk) {
    int64_t o_end = o + chunk < other ? o + chunk : other;
    if (g->by_columns) {
      widen_a(g, shared, o, o_end);
      sgemm_part(g, shared, own, o, o_end, start, end);
    } else {
      widen_b(g, shared, o, o_end);
      sgemm_part(g, own, shared, start, end, o, o_end);
    }
  }
  if (owned) free(shared);
}

static int sgemm_product(bgemm_t *g) {
  g->parts = gemm_cut_parts(g->m, g->n, g->k, dt_get_num_threads());
  g->by_columns = g->n > g->m; /* rows on a tie, as matmul.c's add_product */
  g->status = DT_OK;
  if (g->parts == 1) run_part(g, 0);
  else dt_parallel(g->parts, run_part, g);
  if (g->status != DT_OK)
    return dt_fail(g->status, "dt_matmul_bf16: no memory to convert [%lld x %lld x %lld] to f32",
                   (long long)g->m, (long long)g->n, (long long)g->k);
  return DT_OK;
}

/* ---------------------------------------------------------------- the kernel */

int dt_matmul_bf16(const void *a, const void *b, float *c, int64_t batch, int64_t stride_a,
                   int64_t stride_b, int64_t stride_c, int64_t m, int64_t n, int64_t k,
                   int32_t trans_a, int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc,
                   float alpha, float beta) {
  int checked = dt_check_matmul_bf16(a, b, c, batch, stride_a, stride_b, stride_c, m, n, k, trans_a,
                                     trans_b, lda, ldb, ldc);
  if (checked != DT_OK) return checked;
  pthread_once(&chosen, choose);
  if (engine == ENGINE_NONE) return dt_fail(DT_EUNSUPPORTED, "dt_matmul_bf16: %s", reason);
  if (batch == 0 || m == 0 || n == 0) return DT_OK;
  const uint16_t *ha = a, *hb = b;
  if (engine == ENGINE_ONEDNN && k > 0)
    return onednn_matmul_bf16(ha, hb, c, batch, stride_a, stride_b, stride_c, m, n, k, trans_a,
                              trans_b, lda, ldb, ldc, alpha, beta);
  /* One product after the other, as dt_matmul_batched runs them. */
  for (int64_t i = 0; i < batch; i++) {
    bgemm_t g = {ha + i * stride_a, hb + i * stride_b, c + i * stride_c, m, n, k, lda, ldb, ldc,
                 trans_a, trans_b, alpha, beta, 1, 0, DT_OK};
    int status = sgemm_product(&g);
    if (status != DT_OK) return status;
  }
  return DT_OK;
}
