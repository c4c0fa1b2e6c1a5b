/* Copies between strided views and contiguous memory: dt_copy_strided reads a view (making a
 * non-contiguous tensor contiguous), dt_copy_to_strided writes one, for the gradients of view ops
 * that select part of a tensor (narrow, select, split) and for copies into such views. */
#include "dtrain.h"

/* Gather a strided view (shape and strides in elements, up to 8 dims) into contiguous dst. */
int dt_copy_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                    const int64_t *strides, int32_t elem_size) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_PTR(shape); CHECK_PTR(strides);
  CHECK(ndim >= 0 && ndim <= 8, "dt_copy_strided: %d dimensions (at most 8)", ndim);
  CHECK(elem_size == 4 || elem_size == 1, "dt_copy_strided: element size %d (only 4 or 1)", elem_size);
  int64_t total = 1;
  for (int d = 0; d < ndim; d++) { CHECK(shape[d] >= 0, "dt_copy_strided: negative dim"); total *= shape[d]; }
  if (total == 0) return DT_OK;
  int64_t index[8] = {0};
  int64_t inner = ndim ? shape[ndim - 1] : 1, inner_stride = ndim ? strides[ndim - 1] : 0;
  /* One loop for both element sizes (bool tensors are 1 byte a element). */
#define STRIDED_LOOP(T)                                                                            \
  do {                                                                                             \
    const T *s = src;                                                                              \
    T *out = dst;                                                                                  \
    for (int64_t done = 0; done < total; done += inner) {                                          \
      int64_t offset = 0;                                                                          \
      for (int d = 0; d < ndim - 1; d++) offset += index[d] * strides[d];                          \
      for (int64_t i = 0; i < inner; i++) *out++ = s[offset + i * inner_stride];                   \
      for (int d = ndim - 2; d >= 0; d--) {                                                        \
        if (++index[d] < shape[d]) break;                                                          \
        index[d] = 0;                                                                              \
      }                                                                                            \
    }                                                                                              \
  } while (0)
  if (elem_size == 4) STRIDED_LOOP(int32_t);
  else STRIDED_LOOP(uint8_t);
#undef STRIDED_LOOP
  return DT_OK;
}

/* Scatter contiguous src into the strided view dst (shape and strides in elements, up to 8 dims). */
int dt_copy_to_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                       const int64_t *strides, int32_t elem_size) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_PTR(shape); CHECK_PTR(strides);
  CHECK(ndim >= 0 && ndim <= 8, "dt_copy_to_strided: %d dimensions (at most 8)", ndim);
  CHECK(elem_size == 4 || elem_size == 1, "dt_copy_to_strided: element size %d (1 or 4)", elem_size);
  int64_t total = 1;
  for (int d = 0; d < ndim; d++) {
    CHECK(shape[d] >= 0, "dt_copy_to_strided: negative dimension %lld", (long long)shape[d]);
    total *= shape[d];
  }
  if (total == 0) return DT_OK;
  int64_t index[8] = {0};
  int64_t inner = ndim ? shape[ndim - 1] : 1, inner_stride = ndim ? strides[ndim - 1] : 0;
  for (int64_t done = 0; done < total; done += inner) {
    int64_t offset = 0;
    for (int d = 0; d < ndim - 1; d++) offset += index[d] * strides[d];
    if (elem_size == 4) {
      const int32_t *s = (const int32_t *)src + done;
      int32_t *out = (int32_t *)dst + offset;
      for (int64_t i = 0; i < inner; i++) out[i * inner_stride] = s[i];
    } else {
      const uint8_t *s = (const uint8_t *)src + done;
      uint8_t *out = (uint8_t *)dst + offset;
      for (int64_t i = 0; i < inner; i++) out[i * inner_stride] = s[i];
    }
    for (int d = ndim - 2; d >= 0; d--) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return DT_OK;
}
