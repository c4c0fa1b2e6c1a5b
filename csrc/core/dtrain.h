/* dtrain's native CPU library: the kernels behind the TypeScript tensors.
 * Every function checks its arguments and returns a status (DT_OK on success); the message of the
 * last failure on the calling thread is read with dt_last_error(). No function keeps state between
 * calls beyond the byte counter of the allocator. */
#ifndef DTRAIN_H
#define DTRAIN_H

#include <stddef.h>
#include <stdint.h>

enum dt_status { DT_OK = 0, DT_EINVAL = 1, DT_ENOMEM = 2, DT_EUNSUPPORTED = 3 };

/* Set the thread-local error message and return `status`; used by the CHECK macro. */
int dt_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) return dt_fail(DT_EINVAL, __VA_ARGS__);                                           \
  } while (0)
#define CHECK_PTR(p) CHECK((p) != NULL, "%s: argument '%s' is NULL", __func__, #p)
#define CHECK_COUNT(n) CHECK((n) >= 0, "%s: count '%s' is negative (%lld)", __func__, #n, (long long)(n))

/* Runs fn(ctx, i) for every task i in [0, tasks) on the thread pool (see parallel.c), the caller
 * included; returns when all are done. Threads claim tasks in order as they become free. */
typedef void (*dt_task_fn)(void *ctx, int64_t i);
void dt_parallel(int64_t tasks, dt_task_fn fn, void *ctx);
/* Elements per thread below which an elementwise pass runs whole on the caller: handing off
 * costs more than it saves. */
#define DT_MIN_RANGE 32768
/* Runs fn(ctx, begin, end) over [0, n) cut into one range per thread (ranges of at least
 * min_chunk elements; a smaller n runs whole on the caller). */
typedef void (*dt_range_fn)(void *ctx, int64_t begin, int64_t end);
void dt_parallel_range(int64_t n, int64_t min_chunk, dt_range_fn fn, void *ctx);
/* The pool's size, the calling thread included (dt_set_num_threads). */
int32_t dt_get_num_threads(void);

/* out[o, i] = scale * sum_a x[o, a, i] (reduce.c); also the bias gradient of dt_linear_backward. */
int dt_sum_axis(const float *x, float *out, int64_t outer, int64_t axis, int64_t inner, float scale);

/* Elementwise operations, shared by the forward and backward kernels. */
enum dt_binary_op { DT_ADD = 0, DT_SUB = 1, DT_MUL = 2, DT_DIV = 3 };
enum dt_unary_op {
  DT_RELU = 0, DT_GELU_TANH = 1, DT_GELU_ERF = 2, DT_EXP = 3, DT_LOG = 4, DT_TANH = 5,
  DT_SIGMOID = 6, DT_NEG = 7, DT_SQRT = 8, DT_POW = 9, DT_SCALE = 10, DT_ADD_SCALAR = 11
};

/* Counter-based RNG (splitmix64 over seed and element index): the same seed and offset give the
 * same numbers whatever the thread count or call split, and on whichever device (the CUDA kernels
 * in csrc/cuda include these two functions, hence DT_HOSTDEV). */
#ifdef __CUDACC__
#define DT_HOSTDEV __host__ __device__
#else
#define DT_HOSTDEV
#endif
static inline DT_HOSTDEV uint64_t dt_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* A uniform float in [0, 1) from 24 random bits of the counter's hash. */
static inline DT_HOSTDEV float dt_uniform01(uint64_t seed, uint64_t counter) {
  return (float)(dt_mix64(seed ^ dt_mix64(counter)) >> 40) * (1.0f / 16777216.0f);
}

#endif
