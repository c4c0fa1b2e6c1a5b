/* csrc/core/onednn.c built with f32 operands (-DDT_ONEDNN_F32_OPERANDS), linked to libdtrain for
 * its thread pool and errors, against a double-precision loop: the oneDNN matmul plumbing that
 * dt_matmul_bf16 uses where the CPU has bf16 instructions (descriptors, transposes, leading
 * dimensions, strided and broadcast batches, cuts on dtrain's pool, alpha and beta, the primitive
 * cache), run on any CPU with oneDNN 2.x. Built and run by onednn_f32_test.ts; prints one line per
 * case and "threads B A", the process's threads before the first product (dtrain's pool started)
 * and after the last, and exits 1 on a wrong result. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain.h"
#include "onednn.h"

static int failures;

/* Integers over 4: exact in f32, so that the sums are exact whatever oneDNN's order. */
static float value(void) { return (float)(rand() % 17 - 8) / 4.0f; }

static void check(int64_t batch, int64_t sa, int64_t sb, int64_t sc, int64_t m, int64_t n,
                  int64_t k, int ta, int tb, int64_t lda, int64_t ldb, int64_t ldc, float alpha,
                  float beta) {
  size_t na = (size_t)(batch * sa + (ta ? k * lda : m * lda));
  size_t nb = (size_t)(batch * sb + (tb ? n * ldb : k * ldb));
  size_t nc = (size_t)(batch * sc + m * ldc);
  float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *want = malloc(nc * 4);
  for (size_t i = 0; i < na; i++) a[i] = value();
  for (size_t i = 0; i < nb; i++) b[i] = value();
  for (size_t i = 0; i < nc; i++) want[i] = c[i] = value();
  for (int64_t i = 0; i < batch; i++)
    for (int64_t x = 0; x < m; x++)
      for (int64_t y = 0; y < n; y++) {
        double sum = 0;
        for (int64_t p = 0; p < k; p++)
          sum += (double)a[i * sa + (ta ? p * lda + x : x * lda + p)] *
                 b[i * sb + (tb ? y * ldb + p : p * ldb + y)];
        float *out = &want[i * sc + x * ldc + y];
        *out = (float)(alpha * sum + beta * *out);
      }
  int status = onednn_matmul_bf16(a, b, c, batch, sa, sb, sc, m, n, k, ta, tb, lda, ldb, ldc,
                                  alpha, beta);
  size_t wrong = 0;
  for (size_t i = 0; i < nc; i++) wrong += c[i] != want[i];
  printf("%s batch %lld [%lld x %lld x %lld] ta %d tb %d strides %lld %lld %lld: status %d, %zu wrong\n",
         status == DT_OK && wrong == 0 ? "ok" : "FAIL", (long long)batch, (long long)m,
         (long long)n, (long long)k, ta, tb, (long long)sa, (long long)sb, (long long)sc, status,
         wrong);
  failures += status != DT_OK || wrong != 0;
  free(a), free(b), free(c), free(want);
}

static int threads_now(void) {
  int n = 0;
  DIR *dir = opendir("/proc/self/task");
  for (struct dirent *e; dir && (e = readdir(dir));) n += e->d_name[0] != '.';
  if (dir) closedir(dir);
  return n;
}

static void nothing(void *ctx, int64_t i) { (void)ctx, (void)i; }

int main(void) {
  dt_set_num_threads(2);
  dt_parallel(2, nothing, NULL); /* starts the pool's threads, which count as "before" */
  int before = threads_now();
  char why[256];
  if (onednn_load(why, sizeof why) != DT_OK) {
    printf("SKIP %s\n", why);
    return 0;
  }
  check(1, 0, 0, 0, 5, 7, 33, 0, 0, 33, 7, 7, 1, 0);
  check(1, 0, 0, 0, 5, 7, 33, 1, 0, 5, 7, 7, 1, 0);
  check(1, 0, 0, 0, 5, 7, 33, 0, 1, 33, 33, 7, 1, 0);
  check(1, 0, 0, 0, 5, 7, 33, 1, 1, 8, 40, 9, 2, 0.5f);        /* padded rows, alpha, beta */
  check(3, 5 * 33, 0, 5 * 7, 5, 7, 33, 1, 0, 5, 7, 7, 1, 0);   /* b shared by the batch */
  check(3, 0, 33 * 7, 5 * 7, 5, 7, 33, 0, 1, 33, 33, 7, 1, 0.25f); /* a shared */
  check(3, 40 * 33, 33 * 9, 5 * 11, 5, 7, 33, 0, 0, 40, 9, 11, 1.5f, 0); /* gaps between */
  check(4, 5 * 33, 33 * 7, 0, 5, 7, 33, 0, 0, 33, 7, 7, 1, 0.5f); /* one c: in turn */
  check(1, 0, 0, 0, 5, 7, 33, 0, 0, 33, 7, 7, 1, 0);               /* from the cache */
  /* Big enough to be cut on the pool: by columns, by rows, by the batch. */
  check(2, 64 * 384, 0, 64 * 1536, 64, 1536, 384, 0, 1, 384, 384, 1536, 1, 0.5f);
  check(1, 0, 0, 0, 1536, 384, 64, 1, 0, 1536, 384, 384, 1, 0);
  check(1, 0, 0, 0, 64, 1500, 384, 0, 1, 384, 384, 1600, 2, 0);
  check(8, 128 * 64, 64 * 128, 128 * 128, 128, 128, 64, 0, 1, 64, 64, 128, 1, 0);
  check(1, 0, 0, 0, 301, 203, 100, 1, 1, 301, 100, 203, 1, 0);
  /* More shapes than the cache holds: the last ones are built for their call only. */
  for (int k = 1; k <= 60; k++) check(1, 0, 0, 0, 3, 2, k, 0, 1, k, k, 2, 1, 0);
  printf("threads %d %d\n", before, threads_now());
  return failures ? 1 : 0;
}
