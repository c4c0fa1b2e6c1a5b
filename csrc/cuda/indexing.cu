/* Indexing kernels with csrc/core/indexing.c's prototypes: gather and its scatter-add,
 * index_select and its index-add, the block copy behind cat, where and its backward, tril/triu.
 * Elements are 4 bytes (moved as bits; the backward kernels add f32), masks 1 byte. Shapes passed
 * as `int64_t *` are host memory; the i32 indices are device memory, so a bad one is reported at
 * the next synchronisation (see [Note: device-side errors] in internal.cuh), the CPU reporting it
 * at once. Repeated indices accumulate with atomicAdd. */
#include "internal.cuh"

#define MAX_DIMS 8

/* ---------------------------------------------------------------- gather / scatter-add */

struct gather_t {
  int64_t ishape[MAX_DIMS], xstride[MAX_DIMS];
  int32_t ndim, dim;
  int64_t n, size; /* elements of the index; the size of dimension dim */
};

/* Source offset of index element `at`, or -1 (reported) when its index is out of range. */
__device__ int64_t gather_offset(const gather_t &g, const int32_t *index, int64_t at,
                                 dt_device_error_t *err) {
  int64_t offset = 0, rest = at;
  for (int d = g.ndim - 1; d >= 0; d--) {
    int64_t i = rest % g.ishape[d];
    rest /= g.ishape[d];
    if (d == g.dim) {
      int32_t k = index[at];
      if (k < 0 || k >= g.size) {
        dt_report_device_error(err, DT_DEVERR_INDEX, k, at, g.size);
        return -1;
      }
      i = k;
    }
    offset += i * g.xstride[d];
  }
  return offset;
}

__global__ void gather_kernel(const int32_t *x, const int32_t *index, int32_t *out, gather_t g,
                              dt_device_error_t *err) {
  GRID_LOOP(at, g.n) {
    int64_t from = gather_offset(g, index, at, err);
    out[at] = from < 0 ? 0 : x[from];
  }
}

__global__ void scatter_add_kernel(const float *gy, const int32_t *index, float *gx, gather_t g,
                                   dt_device_error_t *err) {
  GRID_LOOP(at, g.n) {
    int64_t to = gather_offset(g, index, at, err);
    if (to >= 0) atomicAdd(gx + to, gy[at]);
  }
}

static int gather_setup(gather_t *g, const char *fn, const int64_t *xshape, const int64_t *ishape,
                        int32_t ndim, int32_t dim) {
  CHECK(ndim >= 1 && ndim <= MAX_DIMS, "%s: %d dimensions (1 to %d)", fn, ndim, MAX_DIMS);
  CHECK(dim >= 0 && dim < ndim, "%s: dimension %d out of range for %d dimensions", fn, dim, ndim);
  g->ndim = ndim;
  g->dim = dim;
  g->n = 1;
  g->size = xshape[dim];
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
  return DT_OK;
}

DT_EXPORT int dt_gather(const void *x, const int64_t *xshape, const int32_t *index,
                        const int64_t *ishape, int32_t ndim, int32_t dim, void *out) {
  CHECK_PTR(x); CHECK_PTR(xshape); CHECK_PTR(index); CHECK_PTR(ishape); CHECK_PTR(out);
  gather_t g;
  int st = gather_setup(&g, "dt_gather", xshape, ishape, ndim, dim);
  if (st) return st;
  CURRENT(dev);
  if (g.n > 0)
    LAUNCH(dev, g.n, gather_kernel, (const int32_t *)x, index, (int32_t *)out, g, dev->error);
  return DT_OK;
}

DT_EXPORT int dt_scatter_add(const float *gy, const int64_t *xshape, const int32_t *index,
                             const int64_t *ishape, int32_t ndim, int32_t dim, float *gx) {
  CHECK_PTR(gy); CHECK_PTR(xshape); CHECK_PTR(index); CHECK_PTR(ishape); CHECK_PTR(gx);
  gather_t g;
  int st = gather_setup(&g, "dt_scatter_add", xshape, ishape, ndim, dim);
  if (st) return st;
  CURRENT(dev);
  if (g.n > 0) LAUNCH(dev, g.n, scatter_add_kernel, gy, index, gx, g, dev->error);
  return DT_OK;
}

/* ---------------------------------------------------------------- index_select / index_add */

/* A thread per output element of [outer, nindex, inner]; `add` scatters gy into gx instead. */
__global__ void index_select_kernel(const int32_t *x, const int32_t *index, int64_t nindex,
                                    int32_t *out, int64_t outer, int64_t axis, int64_t inner,
                                    int add, dt_device_error_t *err) {
  GRID_LOOP(t, outer * nindex * inner) {
    int64_t i = t % inner, j = (t / inner) % nindex, o = t / (inner * nindex);
    int32_t k = index[j];
    if (k < 0 || k >= axis) {
      if (i == 0 && o == 0) dt_report_device_error(err, DT_DEVERR_INDEX, k, j, axis);
      if (!add) out[t] = 0;
      continue;
    }
    int64_t at = (o * axis + k) * inner + i;
    if (add) atomicAdd((float *)out + at, ((const float *)x)[t]);
    else out[t] = x[at];
  }
}

DT_EXPORT int dt_index_select(const void *x, const int32_t *index, int64_t nindex, void *out,
                              int64_t outer, int64_t axis, int64_t inner) {
  CHECK_PTR(x); CHECK_PTR(index); CHECK_PTR(out);
  CHECK_COUNT(nindex); CHECK_COUNT(outer); CHECK_COUNT(axis); CHECK_COUNT(inner);
  CURRENT(dev);
  int64_t n = outer * nindex * inner;
  if (n > 0)
    LAUNCH(dev, n, index_select_kernel, (const int32_t *)x, index, nindex, (int32_t *)out, outer,
           axis, inner, 0, dev->error);
  return DT_OK;
}

DT_EXPORT int dt_index_add(const float *gy, const int32_t *index, int64_t nindex, float *gx,
                           int64_t outer, int64_t axis, int64_t inner) {
  CHECK_PTR(gy); CHECK_PTR(index); CHECK_PTR(gx);
  CHECK_COUNT(nindex); CHECK_COUNT(outer); CHECK_COUNT(axis); CHECK_COUNT(inner);
  CURRENT(dev);
  int64_t n = outer * nindex * inner;
  if (n > 0)
    LAUNCH(dev, n, index_select_kernel, (const int32_t *)gy, index, nindex, (int32_t *)gx, outer,
           axis, inner, 1, dev->error);
  return DT_OK;
}

/* ---------------------------------------------------------------- cat */

/* `rows` blocks of `row_bytes`, `src_stride` and `dst_stride` bytes apart: one 2-d copy. */
DT_EXPORT int dt_copy_blocks(const void *src, void *dst, int64_t rows, int64_t row_bytes,
                             int64_t src_stride, int64_t dst_stride) {
  CHECK_PTR(src); CHECK_PTR(dst);
  CHECK_COUNT(rows); CHECK_COUNT(row_bytes); CHECK_COUNT(src_stride); CHECK_COUNT(dst_stride);
  CURRENT(dev);
  if (rows == 0 || row_bytes == 0) return DT_OK;
  CHECK(src_stride >= row_bytes && dst_stride >= row_bytes,
        "dt_copy_blocks: strides %lld and %lld are below the row of %lld bytes",
        (long long)src_stride, (long long)dst_stride, (long long)row_bytes);
  cudaCheck(cudaMemcpy2DAsync(dst, (size_t)dst_stride, src, (size_t)src_stride, (size_t)row_bytes,
                              (size_t)rows, cudaMemcpyDeviceToDevice, dev->compute));
  return DT_OK;
}

/* ---------------------------------------------------------------- where */

__global__ void where_kernel(const uint8_t *cond, int64_t nc, const int32_t *a, int64_t na,
                             const int32_t *b, int64_t nb, int32_t *out, int64_t n) {
  GRID_LOOP(i, n) out[i] = cond[i % nc] ? a[i % na] : b[i % nb];
}

__global__ void where_backward_kernel(const uint8_t *cond, int64_t nc, const float *gy, float *ga,
                                      float *gb, int64_t n) {
  GRID_LOOP(i, n) {
    bool keep = cond[i % nc];
    if (ga) ga[i] = keep ? gy[i] : 0.0f;
    if (gb) gb[i] = keep ? 0.0f : gy[i];
  }
}

DT_EXPORT int dt_where(const uint8_t *cond, int64_t nc, const void *a, int64_t na, const void *b,
                       int64_t nb, void *out, int64_t n) {
  CHECK_PTR(cond); CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out); CHECK_COUNT(n);
  CHECK((nc > 0 && na > 0 && nb > 0 && n % nc == 0 && n % na == 0 && n % nb == 0) || n == 0,
        "dt_where: operands of %lld, %lld and %lld elements do not repeat to %lld", (long long)nc,
        (long long)na, (long long)nb, (long long)n);
  CURRENT(dev);
  if (n > 0)
    LAUNCH(dev, n, where_kernel, cond, nc, (const int32_t *)a, na, (const int32_t *)b, nb,
           (int32_t *)out, n);
  return DT_OK;
}

DT_EXPORT int dt_where_backward(const uint8_t *cond, int64_t nc, const float *gy, float *ga,
                                float *gb, int64_t n) {
  CHECK_PTR(cond); CHECK_PTR(gy); CHECK_COUNT(n);
  CHECK((nc > 0 && n % nc == 0) || n == 0,
        "dt_where_backward: a condition of %lld elements does not repeat to %lld", (long long)nc,
        (long long)n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, where_backward_kernel, cond, nc, gy, ga, gb, n);
  return DT_OK;
}

/* ---------------------------------------------------------------- tril / triu */

__global__ void tril_kernel(const int32_t *x, int32_t *out, int64_t total, int64_t rows,
                            int64_t cols, int64_t diagonal, int upper) {
  GRID_LOOP(t, total) {
    int64_t c = t % cols, r = (t / cols) % rows;
    bool keep = upper ? c - r >= diagonal : c - r <= diagonal;
    out[t] = keep ? x[t] : 0;
  }
}

DT_EXPORT int dt_tril(const void *x, void *out, int64_t batch, int64_t rows, int64_t cols,
                      int64_t diagonal, int32_t upper) {
  CHECK_PTR(x); CHECK_PTR(out); CHECK_COUNT(batch); CHECK_COUNT(rows); CHECK_COUNT(cols);
  CURRENT(dev);
  int64_t total = batch * rows * cols;
  if (total > 0)
    LAUNCH(dev, total, tril_kernel, (const int32_t *)x, (int32_t *)out, total, rows, cols,
           diagonal, upper);
  return DT_OK;
}
