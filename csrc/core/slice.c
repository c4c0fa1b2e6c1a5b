/* Copies between strided views and contiguous memory: dt_copy_strided reads a view (making a
 * non-contiguous tensor contiguous), dt_copy_to_strided writes one, for the gradients of view ops
 * that select part of a tensor (narrow, select, split) and for copies into such views. Both walk
 * the view the same way, row by row of its last dimension (strided_copy). */
#include "dtrain.h"

/* Copies between the strided view `view` (shape and strides in elements, up to 8 dims) and the
 * contiguous `flat`, into the view when `into_view`, else out of it; `fn` names the caller in
 * errors. Elements are 4 bytes (f32, i32), 2 (u16) or 1 (bool). */
static int strided_copy(const char *fn, void *view, void *flat, int32_t ndim, const int64_t *shape,
                        const int64_t *strides, int32_t elem_size, int into_view) {
  CHECK(view != NULL, "%s: argument '%s' is NULL", fn, into_view ? "dst" : "src");
  CHECK(flat != NULL, "%s: argument '%s' is NULL", fn, into_view ? "src" : "dst");
  CHECK(shape != NULL, "%s: argument 'shape' is NULL", fn);
  CHECK(strides != NULL, "%s: argument 'strides' is NULL", fn);
  CHECK(ndim >= 0 && ndim <= 8, "%s: %d dimensions (at most 8)", fn, ndim);
  CHECK(elem_size == 4 || elem_size == 2 || elem_size == 1, "%s: element size %d (only 4, 2 or 1)",
        fn, elem_size);
  int64_t total = 1;
  for (int d = 0; d < ndim; d++) {
    CHECK(shape[d] >= 0, "%s: negative dimension %lld", fn, (long long)shape[d]);
    total *= shape[d];
  }
  if (total == 0) return DT_OK;
  int64_t index[8] = {0};
  int64_t inner = ndim ? shape[ndim - 1] : 1, inner_stride = ndim ? strides[ndim - 1] : 0;
  for (int64_t done = 0; done < total; done += inner) {
    int64_t offset = 0;
    for (int d = 0; d < ndim - 1; d++) offset += index[d] * strides[d];
    /* One row of elements of type T, the loop typed so that the compiler moves whole elements. */
#define COPY_ROW(T)                                                                                \
  do {                                                                                             \
    T *v = (T *)view + offset, *f = (T *)flat + done;                                              \
    if (into_view) for (int64_t i = 0; i < inner; i++) v[i * inner_stride] = f[i];                 \
    else for (int64_t i = 0; i < inner; i++) f[i] = v[i * inner_stride];                           \
  } while (0)
    if (elem_size == 4) COPY_ROW(int32_t);
    else if (elem_size == 2) COPY_ROW(uint16_t);
    else COPY_ROW(uint8_t);
#undef COPY_ROW
    for (int d = ndim - 2; d >= 0; d--) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return DT_OK;
}

/* Gather a strided view (shape and strides in elements, up to 8 dims) into contiguous dst. */
int dt_copy_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                    const int64_t *strides, int32_t elem_size) {
  return strided_copy("dt_copy_strided", (void *)src, dst, ndim, shape, strides, elem_size, 0);
}

/* Scatter contiguous src into the strided view dst (shape and strides in elements, up to 8 dims). */
int dt_copy_to_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                       const int64_t *strides, int32_t elem_size) {
  return strided_copy("dt_copy_to_strided", dst, (void *)src, ndim, shape, strides, elem_size, 1);
}
