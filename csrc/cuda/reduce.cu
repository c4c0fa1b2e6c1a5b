/* Reductions over one axis of a contiguous [outer, axis, inner] tensor, their broadcast backward,
 * and row-wise argmax (csrc/core/reduce.c's prototypes). */
#include "internal.cuh"

/* inner == 1: one block per row, a tree sum. */
__global__ void sum_rows_kernel(const float *x, float *out, int64_t axis, float scale) {
  __shared__ float shared[32];
  const float *row = x + blockIdx.x * axis;
  float acc = 0.0f;
  for (int64_t a = threadIdx.x; a < axis; a += blockDim.x) acc += row[a];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = acc * scale;
}

/* inner == 1, few long rows (sum() and mean() of a whole tensor are one row): pass one of [Note:
 * two-pass reductions], a block per chunk of a row (blockIdx.x) and per row (blockIdx.y); then
 * sum_rows_kernel adds each row's partials in order and scales them. */
__global__ void sum_chunks_kernel(const float *x, float *partial, int64_t axis, int64_t chunk) {
  __shared__ float shared[32];
  const float *row = x + blockIdx.y * axis;
  int64_t a0 = (int64_t)blockIdx.x * chunk, a1 = a0 + chunk < axis ? a0 + chunk : axis;
  float acc = 0.0f;
  for (int64_t a = a0 + threadIdx.x; a < a1; a += blockDim.x) acc += row[a];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[(int64_t)blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

/* Elements a chunk of sum_chunks_kernel takes at least: 8 a thread, so a chunk is worth a block. */
#define CHUNK_MIN (8 * THREADS)

/* inner == 1: a block per row, or, when a few rows are long enough to leave most SMs idle, a
 * block per chunk of a row and then a block per row over the chunks' partials. */
static int sum_rows(dt_cuda_device *dev, const float *x, float *out, int64_t outer,
                         int64_t axis, float scale) {
  int64_t chunks = (axis + CHUNK_MIN - 1) / CHUNK_MIN, most = PARTIALS_MAX / outer;
  if (chunks > most) chunks = most;
  if (chunks <= 1) {
    GRID_LAUNCH(sum_rows_kernel, (unsigned)outer, THREADS, 0, dev->compute)(x, out, axis, scale);
    LAUNCH_CHECK();
    return DT_OK;
  }
  int64_t chunk = (axis + chunks - 1) / chunks;
  float *partial;
  int st = dt_cuda_scratch(dev, outer * chunks * (int64_t)sizeof(float), (void **)&partial);
  if (st != DT_OK) return st;
  GRID_LAUNCH(sum_chunks_kernel, dim3((unsigned)chunks, (unsigned)outer), THREADS, 0, dev->compute)(
      x, partial, axis, chunk);
  GRID_LAUNCH(sum_rows_kernel, (unsigned)outer, THREADS, 0, dev->compute)(partial, out, chunks, scale);
  dt_cuda_scratch_free(dev, partial);
  LAUNCH_CHECK();
  return DT_OK;
}

/* inner > 1: a thread per (o, i) sums its column over a chunk of the axis; chunks (blockIdx.y)
 * meet with atomicAdd into an output zeroed first, so a long axis still fills the device. */
__global__ void sum_columns_kernel(const float *x, float *out, int64_t outer, int64_t axis,
                                   int64_t inner, int64_t chunk, float scale) {
  int64_t a0 = (int64_t)blockIdx.y * chunk, a1 = a0 + chunk < axis ? a0 + chunk : axis;
  GRID_LOOP(t, outer * inner) {
    int64_t o = t / inner, i = t % inner;
    const float *src = x + o * axis * inner + i;
    float acc = 0.0f;
    for (int64_t a = a0; a < a1; a++) acc += src[a * inner];
    if (gridDim.y == 1) out[t] = acc * scale;
    else atomicAdd(out + t, acc * scale);
  }
}

DT_EXPORT int dt_sum_axis(const float *x, float *out, int64_t outer, int64_t axis, int64_t inner,
                          float scale) {
  CHECK_PTR(x); CHECK_PTR(out);
  CHECK(outer >= 0 && axis >= 0 && inner >= 0, "dt_sum_axis: negative size");
  CURRENT(dev);
  if (outer == 0 || inner == 0) return DT_OK;
  if (inner == 1 && outer <= 0x7fffffff) return sum_rows(dev, x, out, outer, axis, scale);
  int64_t columns = outer * inner;
  /* Enough chunks that about 64k threads work, each chunk at least 64 rows long. */
  int64_t chunks = columns >= 65536 ? 1 : (65536 + columns - 1) / columns;
  if (chunks > (axis + 63) / 64) chunks = (axis + 63) / 64;
  if (chunks < 1) chunks = 1;
  if (chunks > 65535) chunks = 65535;
  int64_t chunk = (axis + chunks - 1) / chunks;
  if (chunks > 1) cudaCheck(cudaMemsetAsync(out, 0, (size_t)columns * sizeof(float), dev->compute));
  dim3 grid(blocks_for(columns), (unsigned)chunks);
  GRID_LAUNCH(sum_columns_kernel, grid, THREADS, 0, dev->compute)(x, out, outer, axis, inner,
                                                          chunk > 0 ? chunk : 1, scale);
  LAUNCH_CHECK();
  return DT_OK;
}

/* Pass one of [Note: two-pass reductions] (sum_rows_kernel is pass two): each block's sum of
 * squares, so a gradient norm is the same run to run. */
__global__ void sum_squares_kernel(const float *x, int64_t n, float *partial) {
  __shared__ float shared[32];
  float acc = 0.0f;
  GRID_LOOP(i, n) acc += x[i] * x[i];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

DT_EXPORT int dt_sum_squares(const float *x, int64_t n, float *out) {
  CHECK_PTR(x); CHECK_PTR(out); CHECK_COUNT(n);
  CURRENT(dev);
  unsigned blocks = partial_blocks(n);
  float *partial;
  int st = dt_cuda_scratch(dev, blocks * (int64_t)sizeof(float), (void **)&partial);
  if (st != DT_OK) return st;
  GRID_LAUNCH(sum_squares_kernel, blocks, THREADS, 0, dev->compute)(x, n, partial);
  GRID_LAUNCH(sum_rows_kernel, 1, THREADS, 0, dev->compute)(partial, out, blocks, 1.0f);
  dt_cuda_scratch_free(dev, partial);
  LAUNCH_CHECK();
  return DT_OK;
}

__global__ void expand_kernel(const float *gy, float *gx, int64_t outer, int64_t axis,
                              int64_t inner, float scale) {
  GRID_LOOP(t, outer * axis * inner) {
    int64_t i = t % inner, o = t / (axis * inner);
    gx[t] = scale * gy[o * inner + i];
  }
}

DT_EXPORT int dt_expand_axis(const float *gy, float *gx, int64_t outer, int64_t axis,
                             int64_t inner, float scale) {
  CHECK_PTR(gy); CHECK_PTR(gx);
  CHECK(outer >= 0 && axis >= 0 && inner >= 0, "dt_expand_axis: negative size");
  CURRENT(dev);
  int64_t n = outer * axis * inner;
  if (n > 0) LAUNCH(dev, n, expand_kernel, gy, gx, outer, axis, inner, scale);
  return DT_OK;
}

/* One block per row; ties go to the lowest index, like PyTorch and csrc/core. */
__global__ void argmax_kernel(const float *x, int32_t *out, int64_t cols) {
  __shared__ float best_value[THREADS];
  __shared__ int64_t best_index[THREADS];
  const float *row = x + blockIdx.x * cols;
  float bv = -INFINITY;
  int64_t bi = -1;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    if (bi < 0 || row[c] > bv) {
      bv = row[c];
      bi = c;
    }
  }
  best_value[threadIdx.x] = bv;
  best_index[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      float ov = best_value[threadIdx.x + s];
      int64_t oi = best_index[threadIdx.x + s];
      int64_t mi = best_index[threadIdx.x];
      if (oi >= 0 && (mi < 0 || ov > best_value[threadIdx.x] ||
                      (ov == best_value[threadIdx.x] && oi < mi))) {
        best_value[threadIdx.x] = ov;
        best_index[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = (int32_t)best_index[0];
}

DT_EXPORT int dt_argmax_rows(const float *x, int32_t *out, int64_t rows, int64_t cols) {
  CHECK_PTR(x); CHECK_PTR(out);
  CHECK(rows >= 0 && cols > 0, "dt_argmax_rows: bad shape [%lld, %lld]", (long long)rows, (long long)cols);
  CHECK(rows <= 0x7fffffff, "dt_argmax_rows: %lld rows (at most 2^31 - 1 on cuda)", (long long)rows);
  CURRENT(dev);
  if (rows > 0) {
    GRID_LAUNCH(argmax_kernel, (unsigned)rows, THREADS, 0, dev->compute)(x, out, cols);
    LAUNCH_CHECK();
  }
  return DT_OK;
}
