/* oneDNN's matmul primitive for bf16 products (matmul_bf16.c chooses it). libdnnl is opened with
 * dlopen, never linked, so that libdtrain loads where oneDNN is absent, and the build needs no
 * oneDNN header: the few types and functions used are declared in onednn_api.h, as oneDNN 2.x's
 * C API (dnnl.h, dnnl_types.h) has them, and resolved by onednn_load.c. oneDNN 3.x changed that API (memory descriptors became opaque
 * handles, dnnl_matmul_desc_init became dnnl_matmul_primitive_desc_create) and ships as
 * libdnnl.so.3, which is not opened; a libdnnl.so.2 whose version is not 2.x is refused. */
#define _GNU_SOURCE
#include "onednn.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "gemm_cut.h"
#include "half_math.h"
#include "onednn_api.h"

/* ---------------------------------------------------------------- primitives, cached by shape */

typedef struct {
  int64_t batch, stride_a, stride_b, stride_c, m, n, k, lda, ldb, ldc;
  int32_t trans_a, trans_b;
} shape_key;
/* Keys are compared bytewise: no padding may hold garbage. */
_Static_assert(sizeof(shape_key) == 10 * 8 + 2 * 4, "shape_key has padding");

typedef struct {
  shape_key key;
  void *primitive;
  memory_desc a, b, c;
  memory_desc scratchpad; /* the primitive's scratchpad, passed at each run: see execute */
  size_t scratchpad_bytes;
} cached;

/* A training step multiplies a handful of shapes; entries are never evicted (a primitive may be
 * running on another thread), and shapes beyond the cache are built and destroyed per call. */
#define CACHE_SIZE 64
static cached cache[CACHE_SIZE];
static int cache_count;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
/* The implementation oneDNN chose for the first primitive (the probe's), for the report. */
static char impl_name[64];

/* The descriptor of `batch` row-major [rows, cols] matrices (transposed: stored [cols, rows]),
 * `ld` apart in rows and `stride` between matrices; a stride of 0 is a broadcast batch of 1. */
static int describe(memory_desc *md, int type, int64_t batch, int64_t stride, int64_t rows,
                    int64_t cols, int32_t trans, int64_t ld) {
  int64_t dims[12] = {stride == 0 ? 1 : batch, rows, cols};
  int64_t strides[12] = {stride == 0 ? rows * cols : stride, trans ? 1 : ld, trans ? ld : 1};
  return api.md_init_by_strides(md, 3, dims, type, strides);
}

/* Builds the primitive of `key` into `out`, whose descriptors it fills; a oneDNN status. */
static int build(const shape_key *key, cached *out) {
  int st;
  if ((st = describe(&out->a, OPERAND_TYPE, key->batch, key->stride_a, key->m, key->k, key->trans_a,
                     key->lda)) != DNNL_SUCCESS ||
      (st = describe(&out->b, OPERAND_TYPE, key->batch, key->stride_b, key->k, key->n, key->trans_b,
                     key->ldb)) != DNNL_SUCCESS ||
      (st = describe(&out->c, DNNL_F32, key->batch, key->stride_c, key->m, key->n, 0, key->ldc)) !=
          DNNL_SUCCESS)
    return st;
  matmul_desc desc;
  if ((st = api.matmul_desc_init(&desc, &out->a, &out->b, NULL, &out->c)) != DNNL_SUCCESS) return st;
  void *attr = NULL, *pd = NULL;
  if ((st = api.attr_create(&attr)) != DNNL_SUCCESS) return st;
  if ((st = api.attr_set_scratchpad_mode(attr, SCRATCHPAD_MODE_USER)) == DNNL_SUCCESS)
    st = api.pd_create(&pd, &desc, attr, api.engine, NULL);
  api.attr_destroy(attr);
  if (st != DNNL_SUCCESS) return st;
  const memory_desc *scratchpad = api.pd_query_md(pd, QUERY_SCRATCHPAD_MD, 0);
  out->scratchpad_bytes = scratchpad ? api.md_get_size(scratchpad) : 0;
  if (out->scratchpad_bytes) out->scratchpad = *scratchpad;
  const char *impl = NULL;
  if (impl_name[0] == 0 && api.pd_query(pd, QUERY_IMPL_INFO_STR, 0, &impl) == DNNL_SUCCESS && impl)
    snprintf(impl_name, sizeof impl_name, "%s", impl);
  st = api.primitive_create(&out->primitive, pd);
  api.pd_destroy(pd);
  out->key = *key;
  return st;
}

/* [Note: oneDNN's scratchpad]
 * A primitive that packs its operands (the avx512 brgemm matmul does) packs them into a
 * scratchpad. oneDNN's default one is the library's, shared by every primitive unless oneDNN was
 * built for concurrent execution (Debian's is not): two pool threads' products packed into the
 * same bytes, and half of a cut product came out wrong. Primitives are built in the user mode
 * instead, and each run gets this thread's own block, kept between runs (a fresh mapping per run
 * is page faults) and freed with the pool worker's other scratch (dt_release_thread_scratch). */
static _Thread_local struct { void *data; size_t bytes; } scratchpad;

void onednn_release_thread_scratch(void) {
  free(scratchpad.data);
  scratchpad.data = NULL, scratchpad.bytes = 0;
}

/* This thread's scratchpad of at least `bytes`, or NULL when out of memory. */
static void *scratchpad_get(size_t bytes) {
  if (scratchpad.bytes >= bytes) return scratchpad.data;
  onednn_release_thread_scratch();
  if ((scratchpad.data = aligned_alloc(64, (bytes + 63) / 64 * 64)) != NULL) scratchpad.bytes = bytes;
  return scratchpad.data;
}

/* Runs the primitive on a, b into c (a temporary stream: streams are not shared across threads). */
static int execute(const cached *p, const void *a, const void *b, float *c) {
  void *mem[4] = {NULL, NULL, NULL, NULL}, *stream = NULL, *pad = NULL;
  int nargs = p->scratchpad_bytes ? 4 : 3, st;
  if (nargs == 4 && (pad = scratchpad_get(p->scratchpad_bytes)) == NULL) return 1; /* out of memory */
  if ((st = api.memory_create(&mem[0], &p->a, api.engine, (void *)a)) == DNNL_SUCCESS &&
      (st = api.memory_create(&mem[1], &p->b, api.engine, (void *)b)) == DNNL_SUCCESS &&
      (st = api.memory_create(&mem[2], &p->c, api.engine, c)) == DNNL_SUCCESS &&
      (nargs == 3 ||
       (st = api.memory_create(&mem[3], &p->scratchpad, api.engine, pad)) == DNNL_SUCCESS) &&
      (st = api.stream_create(&stream, api.engine, DNNL_STREAM_IN_ORDER)) == DNNL_SUCCESS) {
    exec_arg args[4] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]},
                        {DNNL_ARG_SCRATCHPAD, mem[3]}};
    /* One thread per primitive: see [Note: oneDNN on dtrain's pool]. */
    if (api.omp_set_num_threads) api.omp_set_num_threads(1);
    if ((st = api.primitive_execute(p->primitive, stream, nargs, args)) == DNNL_SUCCESS)
      st = api.stream_wait(stream);
  }
  if (stream) api.stream_destroy(stream);
  for (int i = 0; i < 4; i++)
    if (mem[i]) api.memory_destroy(mem[i]);
  return st;
}

/* c = op(a) @ op(b) for the whole batch (alpha 1, beta 0); a oneDNN status. */
static int product(const shape_key *key, const void *a, const void *b, float *c) {
  pthread_mutex_lock(&cache_lock);
  const cached *hit = NULL;
  for (int i = 0; i < cache_count && !hit; i++)
    if (memcmp(&cache[i].key, key, sizeof *key) == 0) hit = &cache[i];
  int st = DNNL_SUCCESS;
  if (!hit && cache_count < CACHE_SIZE && (st = build(key, &cache[cache_count])) == DNNL_SUCCESS)
    hit = &cache[cache_count++];
  pthread_mutex_unlock(&cache_lock);
  if (st != DNNL_SUCCESS) return st;
  if (hit) return execute(hit, a, b, c);
  cached *once = calloc(1, sizeof *once); /* the cache is full: built for this call only */
  if (once == NULL) return -1;
  if ((st = build(key, once)) == DNNL_SUCCESS) st = execute(once, a, b, c);
  if (once->primitive) api.primitive_destroy(once->primitive);
  free(once);
  return st;
}

/* [Note: oneDNN on dtrain's pool]
 * Debian's oneDNN runs on OpenMP, a second thread pool whose idle threads spin beside dtrain's
 * (parallel.c) on the same cores. Each primitive runs on one thread instead (OpenMP's thread count
 * is the calling thread's), and a product is cut into blocks on dtrain's pool, as matmul.c cuts
 * sgemm's: ranges of the batch when it has a block per thread, else of the larger of op(a)'s rows
 * and op(b)'s columns. Each block's shape is a primitive of its own (two per cut, the last block's
 * smaller). Without omp_set_num_threads (a oneDNN not built on OpenMP) it runs whole, its own way.
 * The flop threshold and the tile alignment are matmul.c's (gemm_cut.h). */
enum { SPLIT_BATCH, SPLIT_ROWS, SPLIT_COLUMNS };

typedef struct {
  const dt_onednn_operand *a, *b;
  float *c;
  int64_t batch, stride_a, stride_b, stride_c, m, n, k, lda, ldb, ldc;
  int32_t trans_a, trans_b;
  int parts, split;
  int status; /* the first failing oneDNN status, or DNNL_SUCCESS */
} job_t;

static void run_block(void *ctx, int64_t part) {
  job_t *j = ctx;
  int64_t dim = j->split == SPLIT_BATCH ? j->batch : j->split == SPLIT_ROWS ? j->m : j->n;
  int64_t step = (dim + j->parts - 1) / j->parts;
  if (j->split != SPLIT_BATCH) step = (step + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
  int64_t start = part * step < dim ? part * step : dim;
  int64_t end = start + step < dim ? start + step : dim;
  if (start == end) return;
  const dt_onednn_operand *a = j->a, *b = j->b;
  float *c = j->c;
  int64_t batch = j->batch, m = j->m, n = j->n;
  if (j->split == SPLIT_BATCH) {
    a += start * j->stride_a, b += start * j->stride_b, c += start * j->stride_c;
    batch = end - start;
  } else if (j->split == SPLIT_ROWS) {
    a += j->trans_a ? start : start * j->lda, c += start * j->ldc;
    m = end - start;
  } else {
    b += j->trans_b ? start * j->ldb : start, c += start;
    n = end - start;
  }
  shape_key key = {batch, batch > 1 ? j->stride_a : 0, batch > 1 ? j->stride_b : 0,
                   batch > 1 ? j->stride_c : 0, m, n, j->k, j->lda, j->ldb, j->ldc,
                   j->trans_a, j->trans_b};
  int st = product(&key, a, b, c);
  if (st != DNNL_SUCCESS) __atomic_store_n(&j->status, st, __ATOMIC_RELAXED);
}

/* c = op(a) @ op(b) (alpha 1, beta 0) for the batch, on the pool; a oneDNN status. */
static int pooled_product(job_t *j) {
  int threads = api.omp_set_num_threads ? dt_get_num_threads() : 1;
  double flops = 2.0 * (double)j->batch * (double)j->m * (double)j->n * (double)j->k;
  j->parts = 1, j->split = SPLIT_BATCH, j->status = DNNL_SUCCESS;
  if (threads > 1 && flops >= MIN_PARALLEL_FLOPS) {
    if (j->batch >= threads) {
      j->parts = threads;
    } else {
      j->split = j->n > j->m ? SPLIT_COLUMNS : SPLIT_ROWS;
      int64_t dim = j->n > j->m ? j->n : j->m, most = (dim + BLOCK_ALIGN - 1) / BLOCK_ALIGN;
      j->parts = most < threads ? (int)most : threads;
    }
  }
  if (j->parts == 1) run_block(j, 0);
  else dt_parallel(j->parts, run_block, j);
  return j->status;
}

int onednn_matmul_bf16(const dt_onednn_operand *a, const dt_onednn_operand *b, float *c, int64_t batch,
                       int64_t stride_a, int64_t stride_b, int64_t stride_c, int64_t m, int64_t n,
                       int64_t k, int32_t trans_a, int32_t trans_b, int64_t lda, int64_t ldb,
                       int64_t ldc, float alpha, float beta) {
  if (stride_c == 0 && batch > 1) { /* one c for every product: in turn, as dt_matmul_batched */
    for (int64_t i = 0; i < batch; i++) {
      int st = onednn_matmul_bf16(a + i * stride_a, b + i * stride_b, c, 1, 0, 0, 0, m, n, k,
                                  trans_a, trans_b, lda, ldb, ldc, alpha, beta);
      if (st != DT_OK) return st;
    }
    return DT_OK;
  }
  job_t job = {a, b, c, batch, stride_a, stride_b, stride_c, m, n, k, lda, ldb, ldc,
               trans_a, trans_b, 1, SPLIT_BATCH, DNNL_SUCCESS};
  /* oneDNN writes op(a) @ op(b); a scaled or accumulated result goes through a scratch copy. */
  float *scratch = NULL;
  if (beta != 0.0f) {
    job.stride_c = m * n, job.ldc = n;
    job.c = scratch = malloc((size_t)(batch * m * n) * sizeof(float));
    if (scratch == NULL)
      return dt_fail(DT_ENOMEM, "dt_matmul_bf16: no memory for a %lld x %lld x %lld result",
                     (long long)batch, (long long)m, (long long)n);
  }
  int st = pooled_product(&job);
  if (st != DNNL_SUCCESS) {
    free(scratch);
    return dt_fail(DT_EUNSUPPORTED,
                   "dt_matmul_bf16: oneDNN's matmul [%lld x %lld x %lld] x %lld failed with status %d",
                   (long long)m, (long long)n, (long long)k, (long long)batch, st);
  }
  if (scratch || alpha != 1.0f) {
    for (int64_t i = 0; i < batch; i++)
      for (int64_t r = 0; r < m; r++) {
        float *row = c + i * stride_c + r * ldc;
        const float *t = scratch ? scratch + (i * m + r) * n : row;
        for (int64_t j = 0; j < n; j++) row[j] = alpha * t[j] + (scratch ? beta * row[j] : 0.0f);
      }
  }
  free(scratch);
  return DT_OK;
}

/* ---------------------------------------------------------------- opening and the probe */

/* A product with small integers, exact in bf16 and f32, in the forms matmul's backward uses: a
 * transposed, b shared by the batch (stride 0). */
static int probe(char *why, size_t len) {
  enum { B = 2, M = 5, N = 7, K = 33 };
  dt_onednn_operand a[B * K * M], b[K * N];
  float c[B * M * N];
  for (int i = 0; i < B * K * M; i++) a[i] = operand_of((float)(i * 7 % 9 - 4));
  for (int i = 0; i < K * N; i++) b[i] = operand_of((float)(i * 5 % 7 - 3));
  if (onednn_matmul_bf16(a, b, c, B, K * M, 0, M * N, M, N, K, 1, 0, M, N, N, 1.0f, 0.0f) != DT_OK) {
    char message[160];
    dt_last_error(message, sizeof message);
    snprintf(why, len, "the probe product failed: %s", message);
    return 0;
  }
  for (int i = 0; i < B; i++)
    for (int r = 0; r < M; r++)
      for (int j = 0; j < N; j++) {
        float want = 0.0f;
        for (int p = 0; p < K; p++)
          want += value_of(a[(i * K + p) * M + r]) * value_of(b[p * N + j]);
        if (c[(i * M + r) * N + j] != want) {
          snprintf(why, len, "the probe product gave %g at [%d, %d, %d], not %g",
                   c[(i * M + r) * N + j], i, r, j, want);
          return 0;
        }
      }
  return 1;
}

int onednn_open(char *why, size_t len) {
  if (!onednn_cpu_has_bf16(why, len) || onednn_load(why, len) != DT_OK) return DT_EUNSUPPORTED;
  const version_t *v = api.version();
  int isa = api.effective_cpu_isa();
  if ((isa & ISA_AVX512_CORE_BF16) != ISA_AVX512_CORE_BF16) {
    snprintf(why, len, "oneDNN %d.%d.%d may not use avx512_bf16 here (effective ISA 0x%x; ONEDNN_MAX_CPU_ISA?)",
             v->major, v->minor, v->patch, (unsigned)isa);
    return DT_EUNSUPPORTED;
  }
  if (!probe(why, len)) return DT_EUNSUPPORTED;
  snprintf(why, len, "oneDNN %d.%d.%d matmul (%s), bf16 inputs with f32 accumulation",
           v->major, v->minor, v->patch, impl_name[0] ? impl_name : "implementation unnamed");
  return DT_OK;
}
