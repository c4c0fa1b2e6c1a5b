/* Batch collation onto the device (csrc/core/data.c's prototypes). The byte datasets and the
 * sampler's indices live in host memory: their rows are gathered and converted on the host
 * straight into a pinned staging block, whose copy to the device runs asynchronously on the
 * compute stream while the next block is gathered (dt_cuda_stage_in). Every index is checked
 * before anything is written, as on the CPU. */
#include <string.h>

#include "internal.cuh"

static int check_indices(const int32_t *indices, int64_t n, int64_t rows) {
  for (int64_t i = 0; i < n; i++) {
    int32_t k = indices[i];
    CHECK(k >= 0 && k < rows, "gather: index %d out of range [0, %lld)", k, (long long)rows);
  }
  return DT_OK;
}

typedef struct {
  const uint8_t *src;
  const int32_t *indices;
  int64_t row_len;
  float scale, shift;
} u8_rows_t;

static void fill_u8_f32(void *ctx, char *block, int64_t first, int64_t count) {
  const u8_rows_t *g = (const u8_rows_t *)ctx;
  float *out = (float *)block;
  for (int64_t i = 0; i < count; i++) {
    const uint8_t *in = g->src + (int64_t)g->indices[first + i] * g->row_len;
    for (int64_t j = 0; j < g->row_len; j++) *out++ = (float)in[j] * g->scale + g->shift;
  }
}

static void fill_u8_i32(void *ctx, char *block, int64_t first, int64_t count) {
  const u8_rows_t *g = (const u8_rows_t *)ctx;
  int32_t *out = (int32_t *)block;
  for (int64_t i = 0; i < count; i++) out[i] = g->src[g->indices[first + i]];
}

static void fill_i32(void *ctx, char *block, int64_t first, int64_t count) {
  memcpy(block, (const int32_t *)ctx + first, (size_t)count * sizeof(int32_t));
}

/* dst (device) rows = host u8 src rows at host `indices`, * scale + shift. */
DT_EXPORT int dt_gather_u8_f32(const uint8_t *src, int64_t src_rows, const int32_t *indices,
                               int64_t n, int64_t row_len, float scale, float shift, float *dst) {
  CHECK_PTR(src); CHECK_PTR(indices); CHECK_PTR(dst);
  CHECK(n >= 0 && row_len > 0, "gather: bad size n=%lld row_len=%lld", (long long)n, (long long)row_len);
  int st = check_indices(indices, n, src_rows);
  if (st != DT_OK) return st;
  CURRENT(dev);
  u8_rows_t g = {src, indices, row_len, scale, shift};
  return dt_cuda_stage_in(dev, dst, n, row_len * (int64_t)sizeof(float), fill_u8_f32, &g);
}

/* dst (device) = host u8 src at host `indices`, widened to int32 (class labels). */
DT_EXPORT int dt_gather_u8_i32(const uint8_t *src, int64_t src_len, const int32_t *indices,
                               int64_t n, int32_t *dst) {
  CHECK_PTR(src); CHECK_PTR(indices); CHECK_PTR(dst); CHECK_COUNT(n);
  int st = check_indices(indices, n, src_len);
  if (st != DT_OK) return st;
  CURRENT(dev);
  u8_rows_t g = {src, indices, 1, 1.0f, 0.0f};
  return dt_cuda_stage_in(dev, dst, n, sizeof(int32_t), fill_u8_i32, &g);
}

__global__ void gather_rows_kernel(const char *src, const int32_t *indices, int64_t n,
                                   int64_t row_bytes, char *dst) {
  GRID_LOOP(t, n * row_bytes) {
    int64_t i = t / row_bytes, b = t % row_bytes;
    dst[t] = src[(int64_t)indices[i] * row_bytes + b];
  }
}

/* dst rows = src rows at host `indices` where src and dst are tensors on this device (a
 * TensorDataset moved to the GPU); the indices travel to the device first. */
DT_EXPORT int dt_gather_rows(const void *src, int64_t src_rows, const int32_t *indices, int64_t n,
                             int64_t row_bytes, void *dst) {
  CHECK_PTR(src); CHECK_PTR(indices); CHECK_PTR(dst);
  CHECK(n >= 0 && row_bytes >= 0, "gather: bad size n=%lld row_bytes=%lld", (long long)n,
        (long long)row_bytes);
  int st = check_indices(indices, n, src_rows);
  if (st != DT_OK || n == 0 || row_bytes == 0) return st;
  CURRENT(dev);
  void *on_device;
  if ((st = dt_cuda_scratch(dev, n * (int64_t)sizeof(int32_t), &on_device)) != DT_OK) return st;
  st = dt_cuda_stage_in(dev, on_device, n, sizeof(int32_t), fill_i32, (void *)indices);
  if (st == DT_OK) {
    GRID_LAUNCH(gather_rows_kernel, blocks_for(n * row_bytes), THREADS, 0, dev->compute)(
        (const char *)src, (const int32_t *)on_device, n, row_bytes, (char *)dst);
  }
  dt_cuda_scratch_free(dev, on_device);
  if (st == DT_OK) LAUNCH_CHECK();
  return st;
}
