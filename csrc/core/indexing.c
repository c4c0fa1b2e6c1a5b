/* Indexing kernels: gather and its scatter-add, index_select and its index-add, the block copy
 * behind cat, where (select by a bool mask) and its backward, and tril/triu.
 * Elements are 4 bytes (f32 or i32: the forward kernels move bits, the backward ones add f32);
 * masks are bool, 1 byte a element. Indices are i32 and must lie in [0, size) of their dimension:
 * a bad one fails with its value and position. Shapes passed as `int64_t *` are host memory. */
#include <string.h>

#include "dtrain.h"

#define MAX_DIMS 8
/* Elements per task: below this a thread hand-off costs more than the copy. */
#define GRAIN 32768

static int check_indices(const char *fn, const int32_t *index, int64_t n, int64_t size) {
  for (int64_t i = 0; i < n; i++) {
    CHECK(index[i] >= 0 && index[i] < size, "%s: index %d at position %lld is out of range for a dimension of size %lld",
          fn, index[i], (long long)i, (long long)size);
  }
  return DT_OK;
}

/* ---------------------------------------------------------------- gather / scatter-add */

typedef struct {
  const int32_t *x;
  const int32_t *index;
  int32_t *out;
  int64_t ishape[MAX_DIMS], xstride[MAX_DIMS];
  int32_t ndim, dim;
  int64_t n;
} gather_job;

/* Source offset of the element at flat position `at` of the index tensor. */
static int64_t gather_offset(const gather_job *g, int64_t at) {
  int64_t offset = 0, rest = at;
  for (int d = g->ndim - 1; d >= 0; d--) {
    int64_t i = rest % g->ishape[d];
    rest /= g->ishape[d];
    offset += (d == g->dim ? g->index[at] : i) * g->xstride[d];
  }
  return offset;
}

static void gather_task(void *ctx, int64_t t) {
  const gather_job *g = ctx;
  int64_t end = (t + 1) * GRAIN < g->n ? (t + 1) * GRAIN : g->n;
  for (int64_t at = t * GRAIN; at < end; at++) g->out[at] = g->x[gather_offset(g, at)];
}

static int gather_setup(gather_job *g, const char *fn, const int64_t *xshape, const int32_t *index,
                        const int64_t *ishape, int32_t ndim, int32_t dim) {
  CHECK(ndim >= 1 && ndim <= MAX_DIMS, "%s: %d dimensions (1 to %d)", fn, ndim, MAX_DIMS);
  CHECK(dim >= 0 && dim < ndim, "%s: dimension %d out of range for %d dimensions", fn, dim, ndim);
  g->ndim = ndim;
  g->dim = dim;
  g->index = index;
  g->n = 1;
  int64_t step = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    CHECK(ishape[d] >= 0 && xshape[d] >= 0, "%s: negative size in dimension %d", fn, d);
    CHECK(d == dim || ishape[d] <= xshape[d],
          "%s: index size %lld exceeds the input's %lld in dimension %d", fn,
          (long long)ishape[d], (long long)xshape[d], d);
    g->ishape[d] = ishape[d];
    g->xstride[d] = step;
    step *= xshape[d];
    g->n *= ishape[d];
  }
  return check_indices(fn, index, g->n, xshape[dim]);
}

/* out[i...] = x[i... with index[i...] in dimension dim]; x and index contiguous, out shaped as
 * index. */
int dt_gather(const void *x, const int64_t *xshape, const int32_t *index, const int64_t *ishape,
              int32_t ndim, int32_t dim, void *out) {
  CHECK_PTR(x); CHECK_PTR(xshape); CHECK_PTR(index); CHECK_PTR(ishape); CHECK_PTR(out);
  gather_job g;
  int status = gather_setup(&g, "dt_gather", xshape, index, ishape, ndim, dim);
  if (status) return status;
  g.x = x;
  g.out = out;
  dt_parallel((g.n + GRAIN - 1) / GRAIN, gather_task, &g);
  return DT_OK;
}

/* gx[... index[i...] ...] += gy[i...]: the gradient of dt_gather into a zeroed gx. Serial, as
 * indices may repeat. */
int dt_scatter_add(const float *gy, const int64_t *xshape, const int32_t *index,
                   const int64_t *ishape, int32_t ndim, int32_t dim, float *gx) {
  CHECK_PTR(gy); CHECK_PTR(xshape); CHECK_PTR(index); CHECK_PTR(ishape); CHECK_PTR(gx);
  gather_job g;
  int status = gather_setup(&g, "dt_scatter_add", xshape, index, ishape, ndim, dim);
  if (status) return status;
  for (int64_t at = 0; at < g.n; at++) gx[gather_offset(&g, at)] += gy[at];
  return DT_OK;
}

/* ---------------------------------------------------------------- index_select / index_add */

/* out[o, j, :] = x[o, index[j], :] for x of shape [outer, axis, inner]. */
int dt_index_select(const void *x, const int32_t *index, int64_t nindex, void *out, int64_t outer,
                    int64_t axis, int64_t inner) {
  CHECK_PTR(x); CHECK_PTR(index); CHECK_PTR(out);
  CHECK_COUNT(nindex); CHECK_COUNT(outer); CHECK_COUNT(axis); CHECK_COUNT(inner);
  int status = check_indices("dt_index_select", index, nindex, axis);
  if (status) return status;
  const int32_t *src = x;
  int32_t *dst = out;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < nindex; j++) {
      memcpy(dst + (o * nindex + j) * inner, src + (o * axis + index[j]) * inner,
             (size_t)inner * sizeof(int32_t));
    }
  }
  return DT_OK;
}

/* gx[o, index[j], :] += gy[o, j, :]: the gradient of dt_index_select into a zeroed gx. */
int dt_index_add(const float *gy, const int32_t *index, int64_t nindex, float *gx, int64_t outer,
                 int64_t axis, int64_t inner) {
  CHECK_PTR(gy); CHECK_PTR(index); CHECK_PTR(gx);
  CHECK_COUNT(nindex); CHECK_COUNT(outer); CHECK_COUNT(axis); CHECK_COUNT(inner);
  int status = check_indices("dt_index_add", index, nindex, axis);
  if (status) return status;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < nindex; j++) {
      const float *g = gy + (o * nindex + j) * inner;
      float *d = gx + (o * axis + index[j]) * inner;
      for (int64_t i = 0; i < inner; i++) d[i] += g[i];
    }
  }
  return DT_OK;
}

/* ---------------------------------------------------------------- cat */

/* Copies `rows` blocks of `row_bytes`, `src_stride` bytes apart in src and `dst_stride` in dst:
 * one input of cat into its slot of each output row. */
int dt_copy_blocks(const void *src, void *dst, int64_t rows, int64_t row_bytes, int64_t src_stride,
                   int64_t dst_stride) {
  CHECK_PTR(src); CHECK_PTR(dst);
  CHECK_COUNT(rows); CHECK_COUNT(row_bytes); CHECK_COUNT(src_stride); CHECK_COUNT(dst_stride);
  const uint8_t *s = src;
  uint8_t *d = dst;
  for (int64_t r = 0; r < rows; r++) memcpy(d + r * dst_stride, s + r * src_stride, (size_t)row_bytes);
  return DT_OK;
}

/* ---------------------------------------------------------------- where */

typedef struct {
  const uint8_t *cond;
  const int32_t *a, *b; /* forward: the values; backward: a is gy */
  int32_t *out, *out2;  /* forward: out; backward: ga, gb (either NULL) */
  int64_t n, nc, na, nb;
} where_job;

static void where_task(void *ctx, int64_t t) {
  const where_job *w = ctx;
  int64_t begin = t * GRAIN, end = begin + GRAIN < w->n ? begin + GRAIN : w->n;
  const uint8_t *restrict cond = w->cond;
  const int32_t *restrict a = w->a, *restrict b = w->b;
  int32_t *restrict out = w->out;
  if (w->nc == w->n && w->na == w->n && w->nb == w->n) {
    /* Branch-free, so that the compiler vectorises it. */
    for (int64_t i = begin; i < end; i++) out[i] = cond[i] ? a[i] : b[i];
    return;
  }
  /* Repeating operands: one running position each, wrapped instead of a division per element. */
  int64_t jc = begin % w->nc, ja = begin % w->na, jb = begin % w->nb;
  for (int64_t i = begin; i < end; i++) {
    int32_t x = a[ja], y = b[jb]; /* both loaded: a select, not a branch on random masks */
    out[i] = cond[jc] ? x : y;
    if (++jc == w->nc) jc = 0;
    if (++ja == w->na) ja = 0;
    if (++jb == w->nb) jb = 0;
  }
}

static void where_backward_task(void *ctx, int64_t t) {
  const where_job *w = ctx;
  const float *gy = (const float *)w->a;
  float *ga = (float *)w->out, *gb = (float *)w->out2;
  int64_t end = (t + 1) * GRAIN < w->n ? (t + 1) * GRAIN : w->n;
  for (int64_t i = t * GRAIN; i < end; i++) {
    int keep = w->cond[w->nc == w->n ? i : i % w->nc];
    if (ga) ga[i] = keep ? gy[i] : 0.0f;
    if (gb) gb[i] = keep ? 0.0f : gy[i];
  }
}

/* out[i] = cond[i] ? a[i] : b[i] for n elements; an operand of fewer elements (nc, na, nb) repeats
 * every that many, as the binary kernels broadcast (a scalar, or a suffix of the output's shape). */
int dt_where(const uint8_t *cond, int64_t nc, const void *a, int64_t na, const void *b, int64_t nb,
             void *out, int64_t n) {
  CHECK_PTR(cond); CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out); CHECK_COUNT(n);
  CHECK((nc > 0 && na > 0 && nb > 0 && n % nc == 0 && n % na == 0 && n % nb == 0) || n == 0,
        "dt_where: operands of %lld, %lld and %lld elements do not repeat to %lld", (long long)nc,
        (long long)na, (long long)nb, (long long)n);
  where_job w = {cond, a, b, out, NULL, n, nc, na, nb};
  dt_parallel((n + GRAIN - 1) / GRAIN, where_task, &w);
  return DT_OK;
}

/* ga = cond ? gy : 0 and gb = cond ? 0 : gy over all n elements (either output may be NULL; the
 * caller sums a repeated operand's gradient); cond repeats every nc elements. */
int dt_where_backward(const uint8_t *cond, int64_t nc, const float *gy, float *ga, float *gb,
                      int64_t n) {
  CHECK_PTR(cond); CHECK_PTR(gy); CHECK_COUNT(n);
  CHECK((nc > 0 && n % nc == 0) || n == 0, "dt_where_backward: a condition of %lld elements does not repeat to %lld",
        (long long)nc, (long long)n);
  where_job w = {cond, (const int32_t *)gy, NULL, (int32_t *)ga, (int32_t *)gb, n, nc, n, n};
  dt_parallel((n + GRAIN - 1) / GRAIN, where_backward_task, &w);
  return DT_OK;
}

/* ---------------------------------------------------------------- tril / triu */

/* Keeps element (r, c) of each of `batch` rows x cols matrices where c - r <= diagonal (tril) or
 * c - r >= diagonal (triu, upper = 1), zeroing the rest; also the gradient of both. */
int dt_tril(const void *x, void *out, int64_t batch, int64_t rows, int64_t cols, int64_t diagonal,
            int32_t upper) {
  CHECK_PTR(x); CHECK_PTR(out); CHECK_COUNT(batch); CHECK_COUNT(rows); CHECK_COUNT(cols);
  const int32_t *s = x;
  int32_t *d = out;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t r = 0; r < rows; r++) {
      int64_t at = (b * rows + r) * cols;
      for (int64_t c = 0; c < cols; c++) {
        int keep = upper ? c - r >= diagonal : c - r <= diagonal;
        d[at + c] = keep ? s[at + c] : 0;
      }
    }
  }
  return DT_OK;
}
