/* Batch collation for data loaders: gather the rows a sampler chose straight into one contiguous
 * batch, converting bytes to floats on the way, so no per-sample buffers are made. */
#include <string.h>

#include "dtrain.h"

/* How many rows ahead a gather prefetches. */
#define PREFETCH_AHEAD 4

/* dst[i, :] = src[indices[i], :] * scale + shift for byte rows of row_len (images). Every index is
 * checked before any row is written. */
int dt_gather_u8_f32(const uint8_t *src, int64_t src_rows, const int32_t *indices, int64_t n,
                     int64_t row_len, float scale, float shift, float *dst) {
  CHECK_PTR(src); CHECK_PTR(indices); CHECK_PTR(dst);
  for (int64_t i = 0; i < n; i++) {
    int32_t k = indices[i];
    CHECK(k >= 0 && k < src_rows, "gather: index %d out of range [0, %lld)", k, (long long)src_rows);
  }
  for (int64_t i = 0; i < n; i++) {
    /* Rows are scattered over the whole dataset: ask for a later row's cache lines now, so its
     * cache and TLB misses overlap this row's conversion. */
    if (i + PREFETCH_AHEAD < n) {
      const uint8_t *ahead = src + (int64_t)indices[i + PREFETCH_AHEAD] * row_len;
      for (int64_t j = 0; j < row_len; j += 64) __builtin_prefetch(ahead + j);
    }
    const uint8_t *in = src + (int64_t)indices[i] * row_len;
    float *out = dst + i * row_len;
    for (int64_t j = 0; j < row_len; j++) out[j] = (float)in[j] * scale + shift;
  }
  return DT_OK;
}

/* dst[i, :] = src[indices[i], :] for rows of row_bytes bytes (any element type). */
int dt_gather_rows(const void *src, int64_t src_rows, const int32_t *indices, int64_t n,
                   int64_t row_bytes, void *dst) {
  CHECK_PTR(src); CHECK_PTR(indices); CHECK_PTR(dst);
  for (int64_t i = 0; i < n; i++) {
    int32_t k = indices[i];
    CHECK(k >= 0 && k < src_rows, "gather: index %d out of range [0, %lld)", k, (long long)src_rows);
    memcpy((char *)dst + i * row_bytes, (const char *)src + (int64_t)k * row_bytes, (size_t)row_bytes);
  }
  return DT_OK;
}

/* dst[i] = src[indices[i]] widened from bytes to int32 (class labels). */
int dt_gather_u8_i32(const uint8_t *src, int64_t src_len, const int32_t *indices, int64_t n, int32_t *dst) {
  CHECK_PTR(src); CHECK_PTR(indices); CHECK_PTR(dst);
  for (int64_t i = 0; i < n; i++) {
    int32_t k = indices[i];
    CHECK(k >= 0 && k < src_len, "gather: index %d out of range [0, %lld)", k, (long long)src_len);
    dst[i] = src[k];
  }
  return DT_OK;
}
