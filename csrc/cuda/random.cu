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

__global__ void randint_kernel(int32_t *dst, int64_t n, int64_t low, uint64_t range,
                               uint64_t seed, uint64_t offset) {
  GRID_LOOP(i, n) dst[i] = (int32_t)dt_randint_at(seed, offset + (uint64_t)i, low, range);
}

DT_EXPORT int dt_randint(int32_t *dst, int64_t n, int64_t low, int64_t high, uint64_t seed,
                         uint64_t offset) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(low < high, "randint: low %lld is not below high %lld", (long long)low, (long long)high);
  CHECK(low >= INT32_MIN && high <= (int64_t)INT32_MAX + 1,
        "randint: [%lld, %lld) is outside the int32 range", (long long)low, (long long)high);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, randint_kernel, dst, n, low, (uint64_t)(high - low), seed, offset);
  return DT_OK;
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
