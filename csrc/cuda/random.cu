/* Seeded initialisers with csrc/core/random.c's prototypes: the same counter RNG
 * (csrc/core/scalar_math.h), so a model initialised on cuda holds the numbers it would on cpu. */
#include "internal.cuh"

__global__ void uniform_kernel(float *dst, int64_t n, float lo, float hi, uint64_t seed,
                               uint64_t offset) {
  GRID_LOOP(i, n) dst[i] = lo + (hi - lo) * dt_uniform01(seed, offset + (uint64_t)i);
}

__global__ void randn_kernel(float *dst, int64_t n, float mean, float std, uint64_t seed,
                             uint64_t offset) {
  GRID_LOOP(i, n) dst[i] = dt_normal(seed, offset + 2 * (uint64_t)i, mean, std);
}

DT_EXPORT int dt_rand_uniform(float *dst, int64_t n, float lo, float hi, uint64_t seed,
                              uint64_t offset) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(lo <= hi, "rand: low %g is above high %g", (double)lo, (double)hi);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, uniform_kernel, dst, n, lo, hi, seed, offset);
  return DT_OK;
}

DT_EXPORT int dt_randn(float *dst, int64_t n, float mean, float std, uint64_t seed,
                       uint64_t offset) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, randn_kernel, dst, n, mean, std, seed, offset);
  return DT_OK;
}
