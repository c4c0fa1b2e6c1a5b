/* Self-test of the cuBLAS stand-in (tests/cuda/host/cublas/): loads the built library with dlopen
 * and the seven names csrc/cuda/libs.cu looks up, as the host build does, and checks its products
 * against a naive column-major triple loop in double, on a fake host-build stream
 * (fake_stream.h): every transpose pair, f32 and bf16 operands, alpha and beta, k == 0, leading
 * dimensions above the minimum (their padding holds NaN, so a read of it shows), strided batches,
 * the row-major call dtrain makes, that products are queued in order rather than run at the call,
 * and the statuses of the calls it must refuse.
 *
 *   (the library: every .cc of tests/cuda/host/cublas, -shared -fPIC, linked with -lopenblas)
 *   c++ -O2 -std=c++17 -Wall -Wextra -o build/cuda_host/cublas_selftest
 *       tests/cuda/host/cublas_selftest/selftest.cc -ldl -pthread
 *   build/cuda_host/cublas_selftest [path/to/libcublas_standin.so]
 * Prints one line per failed check and a summary; exits 1 if any failed. The stand-in's notes on
 * stderr ("cublas stand-in: ...") come from the refusals checked on purpose. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "fake_stream.h"

/* The ABI as libs.h declares it (cudaDataType and the enums as int). */
typedef int (*create_fn)(void **);
typedef int (*destroy_fn)(void *);
typedef int (*set_stream_fn)(void *, void *);
typedef int (*set_math_fn)(void *, int);
typedef int (*gemm_ex_fn)(void *, int, int, int, int, int, const void *, const void *, int, int,
                          const void *, int, int, const void *, void *, int, int, int, int);
typedef int (*gemm_sb_fn)(void *, int, int, int, int, int, const void *, const void *, int, int,
                          long long, const void *, int, int, long long, const void *, void *, int,
                          int, long long, int, int, int);
typedef const char *(*status_fn)(int);

static create_fn create;
static destroy_fn destroy;
static set_stream_fn set_stream;
static set_math_fn set_math;
static gemm_ex_fn gemm_ex;
static gemm_sb_fn gemm_sb;
static status_fn status_string;

enum { N = 0, T = 1, F32 = 0, F16 = 2, BF16 = 14, C32F = 68, TF32 = 77, ALGO = -1 };
enum { OK = 0, NOT_INITIALIZED = 1, INVALID = 7, EXEC_FAILED = 13, NOT_SUPPORTED = 15 };

static int checks, failures;
#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    checks++;                                                                                      \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      printf("FAIL line %d: ", __LINE__);                                                          \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)
#define EXPECT_STATUS(got, want, what)                                                             \
  do {                                                                                             \
    int got_ = (got);                                                                              \
    EXPECT(got_ == (want), "%s: %s, expected %s", what, status_string(got_), status_string(want)); \
  } while (0)

static unsigned long long rng = 88172645463325252ULL;
static float rand_unit() { /* in [-1, 1), a multiple of 2^-8: exact in bf16 */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((int)(rng % 512) - 256) / 256.0f;
}
static uint16_t to_bf16(float x) { /* exact for the values rand_unit makes */
  uint32_t bits;
  memcpy(&bits, &x, 4);
  return (uint16_t)(bits >> 16);
}

/* A column-major operand of `batch` matrices rows x cols, leading dimension ld, `stride` elements
 * apart, in f32 (values) and bf16 (bits); everything outside the matrices is NaN. */
struct matrix {
  int rows, cols, ld, batch;
  long long stride;
  std::vector<float> f;
  std::vector<uint16_t> h;
  matrix(int r, int c, int ld_, int b, long long s)
      : rows(r), cols(c), ld(ld_), batch(b), stride(s) {
    size_t n = (size_t)((b - 1) * s + (long long)ld * c + 1);
    f.assign(n, NAN);
    h.assign(n, 0x7fc0); /* bf16 NaN */
  }
  float &at(int i, int r, int c) { return f[(size_t)(i * stride + r + (long long)c * ld)]; }
  void fill() {
    for (int i = 0; i < batch; i++)
      for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++) {
          at(i, r, c) = rand_unit();
          h[(size_t)(i * stride + r + (long long)c * ld)] = to_bf16(at(i, r, c));
        }
  }
};

/* One product checked: C = alpha op(A) op(B) + beta C over `batch`, against a double loop. */
static void check_product(void *handle, fake_stream &s, int ta, int tb, int m, int n, int k,
                          int pad, int batch, bool bf16, float alpha, float beta, bool strided_api,
                          bool broadcast_a) {
  int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  int lda = (ar > 1 ? ar : 1) + pad, ldb = (br > 1 ? br : 1) + pad, ldc = (m > 1 ? m : 1) + pad;
  long long sa = broadcast_a ? 0 : (long long)lda * ac + 5, sb = (long long)ldb * bc + 3;
  long long sc = (long long)ldc * n + 2;
  matrix a(ar, ac, lda, broadcast_a ? 1 : batch, sa), b(br, bc, ldb, batch, sb);
  matrix c(m, n, ldc, batch, sc);
  a.fill(), b.fill(), c.fill();
  for (float &x : c.f)
    if (isnan(x)) x = 12345.0f; /* C's padding: must come back untouched */
  if (beta == 0.0f) /* beta == 0 must not read C: NaN there must not survive */
    for (int i = 0; i < batch; i++)
      for (int col = 0; col < n; col++)
        for (int r = 0; r < m; r++) c.at(i, r, col) = NAN;
  std::vector<float> before = c.f;
  const void *pa = bf16 ? (const void *)a.h.data() : a.f.data();
  const void *pb = bf16 ? (const void *)b.h.data() : b.f.data();
  int type = bf16 ? BF16 : F32, compute = (!bf16 && (m + n) % 2) ? TF32 : C32F;
  int st = (batch == 1 && !strided_api)
               ? gemm_ex(handle, ta, tb, m, n, k, &alpha, pa, type, lda, pb, type, ldb, &beta,
                         c.f.data(), F32, ldc, compute, ALGO)
               : gemm_sb(handle, ta, tb, m, n, k, &alpha, pa, type, lda, sa, pb, type, ldb, sb,
                         &beta, c.f.data(), F32, ldc, sc, batch, compute, ALGO);
  char what[200];
  snprintf(what, sizeof what, "%s%s m=%d n=%d k=%d pad=%d batch=%d %s alpha=%g beta=%g%s",
           ta ? "T" : "N", tb ? "T" : "N", m, n, k, pad, batch, bf16 ? "bf16" : "f32", alpha, beta,
           broadcast_a ? " A broadcast" : "");
  EXPECT_STATUS(st, OK, what);
  s.sync();
  int bad = 0;
  for (size_t e = 0; e < c.f.size(); e++) {
    long long i = (long long)e / sc, off = (long long)e % sc, col = off / ldc, r = off % ldc;
    bool inside = i < batch && col < n && r < m;
    if (!inside) {
      if (!(c.f[e] == 12345.0f || (isnan(c.f[e]) && isnan(before[e])))) bad++;
      continue;
    }
    double sum = 0, mag = 0;
    for (int l = 0; l < k; l++) {
      double x = ta ? a.at(broadcast_a ? 0 : i, l, r) : a.at(broadcast_a ? 0 : i, r, l);
      double y = tb ? b.at(i, col, l) : b.at(i, l, col);
      sum += x * y, mag += fabs(x * y);
    }
    double old_c = beta == 0.0f ? 0.0 : beta * (double)before[e]; /* NaN must not be read */
    double want = alpha * sum + old_c, tol = 1e-5 * (fabs(alpha) * mag + fabs(old_c)) + 1e-30;
    if (!(fabs((double)c.f[e] - want) <= tol)) {
      if (bad++ == 0)
        printf("  %s: C(%lld,%lld) of #%lld = %.9g, expected %.9g\n", what, r, col, i, c.f[e],
               want);
    }
  }
  EXPECT(bad == 0, "%s: %d wrong elements", what, bad);
}

/* Row-major C = A B as dtrain computes it (csrc/cuda/matmul.cu): the column-major
 * C^T = B^T A^T, operands swapped, no copy. */
static void check_row_major(void *handle, fake_stream &s) {
  const int m = 3, n = 4, k = 5;
  float a[m * k], b[k * n], c[m * n], alpha = 1, beta = 0;
  for (float &x : a) x = rand_unit();
  for (float &x : b) x = rand_unit();
  EXPECT_STATUS(gemm_ex(handle, N, N, n, m, k, &alpha, b, F32, n, a, F32, k, &beta, c, F32, n,
                        C32F, ALGO),
                OK, "row-major product");
  s.sync();
  int bad = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double want = 0;
      for (int l = 0; l < k; l++) want += (double)a[i * k + l] * b[l * n + j];
      if (fabs(c[i * n + j] - want) > 1e-5) bad++;
    }
  EXPECT(bad == 0, "row-major product: %d wrong elements", bad);
}

struct write_job {
  float *dst;
  float value;
};
static void write_value(void *arg) {
  write_job *w = (write_job *)arg;
  *w->dst = w->value;
}

/* The product runs on the stream, in order: not at the call, and after what was queued before. */
static void check_queued(fake_stream &s) {
  void *h = NULL;
  EXPECT_STATUS(create(&h), OK, "create");
  EXPECT_STATUS(set_stream(h, &s), OK, "set stream");
  float a = 1, b = 3, c = 7, alpha = 2, beta = 1;
  write_job w = {&a, 5.0f};
  s.hold();
  EXPECT(fake_enqueue(&s, write_value, &w) == 0, "enqueue the write");
  size_t queued = s.queued_count();
  EXPECT_STATUS(gemm_ex(h, N, N, 1, 1, 1, &alpha, &a, F32, 1, &b, F32, 1, &beta, &c, F32, 1, C32F,
                        ALGO),
                OK, "gemm on a held stream");
  alpha = 100; /* host scalars are read at the call */
  EXPECT(s.queued_count() == queued + 1, "the product was not queued on the stream");
  EXPECT(c == 7.0f, "the product ran at the call (C = %g)", c);
  EXPECT_STATUS(destroy(h), OK, "destroy with a product pending");
  s.release();
  s.sync();
  EXPECT(c == 37.0f, "queued product: C = %g, expected 2 * 5 * 3 + 7 = 37", c);
}

static void check_refusals(fake_stream &s) {
  float x[64] = {0}, one = 1, nan_c[4] = {NAN, NAN, NAN, NAN};
  void *h = NULL;
  EXPECT_STATUS(create(NULL), INVALID, "create(NULL)");
  EXPECT_STATUS(destroy(NULL), NOT_INITIALIZED, "destroy(NULL)");
  EXPECT_STATUS(set_stream(NULL, &s), NOT_INITIALIZED, "set_stream(NULL handle)");
  EXPECT_STATUS(set_math(NULL, 0), NOT_INITIALIZED, "set_math(NULL handle)");
  EXPECT_STATUS(gemm_ex(NULL, N, N, 1, 1, 1, &one, x, F32, 1, x, F32, 1, &one, x, F32, 1, C32F,
                        ALGO),
                NOT_INITIALIZED, "gemm on a NULL handle");
  EXPECT_STATUS(create(&h), OK, "create");
  EXPECT_STATUS(gemm_ex(h, N, N, 1, 1, 1, &one, x, F32, 1, x, F32, 1, &one, x, F32, 1, C32F, ALGO),
                NOT_SUPPORTED, "gemm with no stream set");
  struct { const void *ops; } not_host = {x};
  EXPECT_STATUS(set_stream(h, &not_host), NOT_SUPPORTED, "a stream not of the host build");
  EXPECT_STATUS(set_stream(h, NULL), OK, "set_stream(NULL)");
  EXPECT_STATUS(gemm_ex(h, N, N, 0, 1, 1, &one, x, F32, 1, x, F32, 1, &one, x, F32, 1, C32F, ALGO),
                NOT_SUPPORTED, "empty gemm on the default stream");
  EXPECT_STATUS(set_math(h, 0), OK, "default math");
  EXPECT_STATUS(set_math(h, 3), OK, "TF32 math");
  EXPECT_STATUS(set_math(h, 2), NOT_SUPPORTED, "pedantic math");
  EXPECT_STATUS(set_math(h, 16), NOT_SUPPORTED, "disallow-reduced-precision flag");
  EXPECT_STATUS(set_math(h, 5), INVALID, "math mode 5");
  EXPECT_STATUS(set_stream(h, &s), OK, "set stream");
  size_t queued = s.queued_count();
  /* One argument off per row; x stands for every matrix. */
  static const struct {
    const char *what;
    int ta, tb, m, n, k, atype, lda, btype, ldb, ctype, ldc, compute, algo, want;
    bool null_alpha, null_c;
  } calls[] = {
      {"m < 0", N, N, -1, 2, 2, F32, 2, F32, 2, F32, 2, C32F, ALGO, INVALID, 0, 0},
      {"k < 0", N, N, 2, 2, -1, F32, 2, F32, 2, F32, 2, C32F, ALGO, INVALID, 0, 0},
      {"transa 5", 5, N, 2, 2, 2, F32, 2, F32, 2, F32, 2, C32F, ALGO, INVALID, 0, 0},
      {"lda < m", N, N, 3, 2, 2, F32, 2, F32, 2, F32, 3, C32F, ALGO, INVALID, 0, 0},
      {"transposed lda < k", T, N, 2, 2, 3, F32, 2, F32, 3, F32, 2, C32F, ALGO, INVALID, 0, 0},
      {"ldb < k", N, N, 2, 2, 3, F32, 2, F32, 2, F32, 2, C32F, ALGO, INVALID, 0, 0},
      {"transposed ldb < n", N, T, 2, 3, 2, F32, 2, F32, 2, F32, 2, C32F, ALGO, INVALID, 0, 0},
      {"ldc < m", N, N, 3, 2, 2, F32, 3, F32, 2, F32, 2, C32F, ALGO, INVALID, 0, 0},
      {"lda 0 on m = 0", N, N, 0, 2, 2, F32, 0, F32, 2, F32, 1, C32F, ALGO, INVALID, 0, 0},
      {"alpha NULL", N, N, 2, 2, 2, F32, 2, F32, 2, F32, 2, C32F, ALGO, INVALID, 1, 0},
      {"C NULL", N, N, 2, 2, 2, F32, 2, F32, 2, F32, 2, C32F, ALGO, INVALID, 0, 1},
      {"algo 50", N, N, 2, 2, 2, F32, 2, F32, 2, F32, 2, C32F, 50, INVALID, 0, 0},
      {"f16 operands", N, N, 2, 2, 2, F16, 2, F16, 2, F32, 2, C32F, ALGO, NOT_SUPPORTED, 0, 0},
      {"f32 x bf16", N, N, 2, 2, 2, F32, 2, BF16, 2, F32, 2, C32F, ALGO, NOT_SUPPORTED, 0, 0},
      {"bf16 C", N, N, 2, 2, 2, BF16, 2, BF16, 2, BF16, 2, C32F, ALGO, NOT_SUPPORTED, 0, 0},
      {"bf16 with TF32", N, N, 2, 2, 2, BF16, 2, BF16, 2, F32, 2, TF32, ALGO, NOT_SUPPORTED, 0, 0},
      {"pedantic compute", N, N, 2, 2, 2, F32, 2, F32, 2, F32, 2, 69, ALGO, NOT_SUPPORTED, 0, 0},
      {"m = 0", N, N, 0, 2, 2, F32, 1, F32, 2, F32, 1, C32F, ALGO, OK, 0, 0},
  };
  for (const auto &g : calls)
    EXPECT_STATUS(gemm_ex(h, g.ta, g.tb, g.m, g.n, g.k, g.null_alpha ? NULL : &one, x, g.atype,
                          g.lda, x, g.btype, g.ldb, &one, g.null_c ? NULL : x, g.ctype, g.ldc,
                          g.compute, g.algo),
                  g.want, g.what);
  EXPECT_STATUS(gemm_sb(h, N, N, 2, 2, 2, &one, x, F32, 2, 4, x, F32, 2, 4, &one, x, F32, 2, 4, -1,
                        C32F, ALGO),
                INVALID, "batch < 0");
  EXPECT_STATUS(gemm_sb(h, N, N, 2, 2, 2, &one, x, F32, 2, 4, x, F32, 2, 4, &one, x, F32, 2, 4, 0,
                        C32F, ALGO),
                OK, "batch = 0");
  EXPECT(s.queued_count() == queued, "a refused or empty product was queued");
  /* k == 0 and alpha == 0: C = beta C, A and B not read (NULL is fine); beta == 0 zeroes NaN. */
  float zero = 0, two = 2, c2[2] = {1.5f, -3};
  EXPECT_STATUS(gemm_ex(h, N, N, 2, 2, 0, &one, NULL, F32, 2, NULL, F32, 1, &zero, nan_c, F32, 2,
                        C32F, ALGO),
                OK, "k = 0, beta = 0");
  EXPECT_STATUS(gemm_ex(h, T, N, 2, 1, 4, &zero, NULL, BF16, 4, NULL, BF16, 4, &two, c2, F32, 2,
                        C32F, ALGO),
                OK, "alpha = 0, beta = 2");
  s.sync();
  EXPECT(nan_c[0] == 0 && nan_c[1] == 0 && nan_c[2] == 0 && nan_c[3] == 0 && !signbit(nan_c[0]),
         "k = 0, beta = 0 left C = %g %g %g %g", nan_c[0], nan_c[1], nan_c[2], nan_c[3]);
  EXPECT(c2[0] == 3.0f && c2[1] == -6.0f, "alpha = 0, beta = 2: C = %g %g", c2[0], c2[1]);
  /* A stream whose device has failed takes nothing: EXECUTION_FAILED, the job freed here. */
  fake_stream dead;
  fake_fail(&dead, "(on purpose)");
  EXPECT_STATUS(set_stream(h, &dead), OK, "set a failed stream");
  EXPECT_STATUS(gemm_ex(h, N, N, 2, 2, 2, &one, x, BF16, 2, x, BF16, 2, &one, x, F32, 2, C32F,
                        ALGO),
                EXEC_FAILED, "gemm on a failed stream");
  EXPECT_STATUS(destroy(h), OK, "destroy");
}

/* Two streams at once, so OpenBLAS is called from two stream threads together: 24 products
 * queued on each before either is waited for, all equal to the first one. */
static void check_concurrent(void *h, fake_stream &s) {
  const int m = 96, n = 80, k = 112, count = 24;
  fake_stream s2;
  void *h2 = NULL;
  EXPECT_STATUS(create(&h2), OK, "create");
  EXPECT_STATUS(set_stream(h2, &s2), OK, "set stream");
  std::vector<float> a(m * k), b(k * n), c((size_t)(2 * count + 1) * m * n);
  for (float &x : a) x = rand_unit();
  for (float &x : b) x = rand_unit();
  float alpha = 1, beta = 0;
  EXPECT_STATUS(gemm_ex(h, N, T, m, n, k, &alpha, a.data(), F32, m, b.data(), F32, n, &beta,
                        c.data(), F32, m, C32F, ALGO),
                OK, "reference product");
  s.sync();
  for (int i = 0; i < count; i++) {
    float *c1 = &c[(size_t)(1 + 2 * i) * m * n], *c2 = c1 + m * n;
    EXPECT_STATUS(gemm_ex(h, N, T, m, n, k, &alpha, a.data(), F32, m, b.data(), F32, n, &beta, c1,
                          F32, m, C32F, ALGO),
                  OK, "product on stream 1");
    EXPECT_STATUS(gemm_ex(h2, N, T, m, n, k, &alpha, a.data(), F32, m, b.data(), F32, n, &beta,
                          c2, F32, m, TF32, ALGO),
                  OK, "product on stream 2");
  }
  s.sync();
  s2.sync();
  int bad = 0;
  for (size_t e = (size_t)m * n; e < c.size(); e++)
    if (fabsf(c[e] - c[e % ((size_t)m * n)]) > 1e-5f * (1 + fabsf(c[e % ((size_t)m * n)]))) bad++;
  EXPECT(bad == 0, "concurrent products: %d elements differ from the first product", bad);
  EXPECT_STATUS(destroy(h2), OK, "destroy");
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "build/cuda_host/libcublas_standin.so";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return 2;
  }
#define LOAD(var, name)                                                                            \
  if ((*(void **)&var = dlsym(lib, name)) == NULL) {                                               \
    fprintf(stderr, "%s lacks %s\n", path, name);                                                  \
    return 2;                                                                                      \
  }
  LOAD(create, "cublasCreate_v2");
  LOAD(destroy, "cublasDestroy_v2");
  LOAD(set_stream, "cublasSetStream_v2");
  LOAD(set_math, "cublasSetMathMode");
  LOAD(gemm_ex, "cublasGemmEx");
  LOAD(gemm_sb, "cublasGemmStridedBatchedEx");
  LOAD(status_string, "cublasGetStatusString");

  EXPECT(strcmp(status_string(0), "CUBLAS_STATUS_SUCCESS") == 0, "status 0");
  EXPECT(strcmp(status_string(7), "CUBLAS_STATUS_INVALID_VALUE") == 0, "status 7");
  EXPECT(strcmp(status_string(15), "CUBLAS_STATUS_NOT_SUPPORTED") == 0, "status 15");
  EXPECT(strcmp(status_string(13), "CUBLAS_STATUS_EXECUTION_FAILED") == 0, "status 13");
  EXPECT(strcmp(status_string(1), "CUBLAS_STATUS_NOT_INITIALIZED") == 0, "status 1");
  EXPECT(strcmp(status_string(99), "<unknown>") == 0, "status 99");

  fake_stream s;
  void *h = NULL;
  EXPECT_STATUS(create(&h), OK, "create");
  EXPECT_STATUS(set_stream(h, &s), OK, "set stream");
  static const int sizes[][3] = {{1, 1, 1},    {3, 5, 7}, {17, 9, 33},
                                 {64, 48, 80}, {4, 6, 0}, {1, 7, 2}};
  static const float scalars[][2] = {{1, 0}, {0.5f, 1}, {-2, 0.75f}};
  int variant = 0;
  for (int bf16 = 0; bf16 < 2; bf16++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (const auto &sz : sizes)
          for (int pad = 0; pad < 4; pad += 3)
            for (const auto &ab : scalars) {
              variant++;
              int batch = variant % 3 == 0 ? 3 : 1;
              check_product(h, s, ta, tb, sz[0], sz[1], sz[2], pad, batch, bf16, ab[0], ab[1],
                            variant % 2 == 0, batch > 1 && variant % 2 == 0);
            }
  check_row_major(h, s);
  check_concurrent(h, s);
  EXPECT_STATUS(destroy(h), OK, "destroy");
  check_queued(s);
  check_refusals(s);
  printf("cublas stand-in self-test: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
