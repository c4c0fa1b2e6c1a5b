/* Seeded initialisation from the counter-based RNG in scalar_math.h. */
#include "dtrain.h"
#include "scalar_math.h"

/* dst[i] = lo + (hi - lo) * U(seed, offset + i). */
int dt_rand_uniform(float *dst, int64_t n, float lo, float hi, uint64_t seed, uint64_t offset) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(lo <= hi, "rand: low %g is above high %g", (double)lo, (double)hi);
  for (int64_t i = 0; i < n; i++) dst[i] = lo + (hi - lo) * dt_uniform01(seed, offset + (uint64_t)i);
  return DT_OK;
}

/* dst[i] = low + hash(seed, offset + i) mod (high - low); src/tensor/random.ts has its host twin. */
int dt_randint(int32_t *dst, int64_t n, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(low < high, "randint: low %lld is not below high %lld", (long long)low, (long long)high);
  CHECK(low >= INT32_MIN && high <= (int64_t)INT32_MAX + 1,
        "randint: [%lld, %lld) is outside the int32 range", (long long)low, (long long)high);
  for (int64_t i = 0; i < n; i++)
    dst[i] = (int32_t)dt_randint_at(seed, offset + (uint64_t)i, low, (uint64_t)(high - low));
  return DT_OK;
}

/* dst[i] = mean + std * N(0, 1), by Box-Muller over the counters offset + 2i and offset + 2i + 1. */
int dt_randn(float *dst, int64_t n, float mean, float std, uint64_t seed, uint64_t offset) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) dst[i] = dt_normal(seed, offset + 2 * (uint64_t)i, mean, std);
  return DT_OK;
}
