/* Copies between strided views and contiguous device memory, with csrc/core/slice.c's prototypes:
 * dt_copy_strided reads a view into contiguous memory, dt_copy_to_strided writes contiguous
 * memory into a view. Shape and strides (in elements, 8 dimensions at most) are host memory and
 * travel by value in the launch; elements are 4 bytes, or 1 (bool). */
#include "internal.cuh"

struct view_t {
  int64_t shape[8], strides[8];
  int32_t ndim;
};

/* The element offset in the view of the i-th element in row-major order. */
__device__ __forceinline__ int64_t view_offset(const view_t &v, int64_t i) {
  int64_t rest = i, offset = 0;
  for (int d = v.ndim - 1; d >= 0; d--) {
    offset += (rest % v.shape[d]) * v.strides[d];
    rest /= v.shape[d];
  }
  return offset;
}

/* to_view 0 reads the view (dst[i] = src[offset]); 1 writes it (dst[offset] = src[i]). */
template <typename T>
__global__ void strided_kernel(const T *src, T *dst, view_t v, int64_t total, int to_view) {
  GRID_LOOP(i, total) {
    int64_t offset = view_offset(v, i);
    if (to_view) dst[offset] = src[i];
    else dst[i] = src[offset];
  }
}

static int copy_view(const char *fn, const void *src, void *dst, int32_t ndim,
                     const int64_t *shape, const int64_t *strides, int32_t elem_size, int to_view) {
  CHECK(ndim >= 0 && ndim <= 8, "%s: %d dimensions (at most 8)", fn, ndim);
  CHECK(elem_size == 4 || elem_size == 2 || elem_size == 1, "%s: element size %d (only 4, 2 or 1)",
        fn, elem_size);
  view_t v = {};
  v.ndim = ndim;
  int64_t total = 1;
  for (int d = 0; d < ndim; d++) {
    CHECK(shape[d] >= 0, "%s: negative dimension %lld", fn, (long long)shape[d]);
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
    total *= shape[d];
  }
  CURRENT(dev);
  if (total == 0) return DT_OK;
  if (elem_size == 4)
    LAUNCH(dev, total, strided_kernel<int32_t>, (const int32_t *)src, (int32_t *)dst, v, total,
           to_view);
  else if (elem_size == 2)
    LAUNCH(dev, total, strided_kernel<uint16_t>, (const uint16_t *)src, (uint16_t *)dst, v, total,
           to_view);
  else
    LAUNCH(dev, total, strided_kernel<uint8_t>, (const uint8_t *)src, (uint8_t *)dst, v, total,
           to_view);
  return DT_OK;
}

DT_EXPORT int dt_copy_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                              const int64_t *strides, int32_t elem_size) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_PTR(shape); CHECK_PTR(strides);
  return copy_view("dt_copy_strided", src, dst, ndim, shape, strides, elem_size, 0);
}

DT_EXPORT int dt_copy_to_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                                 const int64_t *strides, int32_t elem_size) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_PTR(shape); CHECK_PTR(strides);
  return copy_view("dt_copy_to_strided", src, dst, ndim, shape, strides, elem_size, 1);
}
