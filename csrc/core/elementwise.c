/* Elementwise kernels: fills, copies, casts, unary and binary maps and their backwards (their
 * per-element math is scalar_math.h's, shared with csrc/cuda/elementwise.cu).
 * Binary operands broadcast over leading dimensions: the shorter operand's shape is a suffix of
 * the output's, so its elements repeat every `nb` (or `na`) output elements. */
#include <math.h>
#include <string.h>

#include "broadcast.h"
#include "dtrain.h"
#include "scalar_math.h"

int dt_fill_f32(float *dst, int64_t n, float value) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) dst[i] = value;
  return DT_OK;
}

int dt_fill_i32(int32_t *dst, int64_t n, int32_t value) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) dst[i] = value;
  return DT_OK;
}

int dt_copy(void *dst, const void *src, int64_t nbytes) {
  CHECK_PTR(dst); CHECK_PTR(src); CHECK_COUNT(nbytes);
  memmove(dst, src, (size_t)nbytes);
  return DT_OK;
}

int dt_cast_i32_f32(const int32_t *src, float *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
  return DT_OK;
}

int dt_cast_u16_i32(const uint16_t *src, int32_t *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) dst[i] = (int32_t)src[i];
  return DT_OK;
}

/* Truncates toward zero, saturating at the int32 range; NaN becomes 0 (a plain C cast of such
 * values is undefined behaviour). */
int dt_cast_f32_i32(const float *src, int32_t *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) {
    float v = src[i];
    dst[i] = v != v ? 0 : v >= 2147483647.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
  }
  return DT_OK;
}

/* ---------------------------------------------------------------- binary ops */

#define BINARY_LOOP(OPEXPR)                                                                        \
  do {                                                                                             \
    if (na == n && nb == n) {                                                                      \
      for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[i]; out[i] = OPEXPR; }                \
    } else if (na == n) {                                                                          \
      for (int64_t r = 0; r < n; r += nb)                                                          \
        for (int64_t j = 0; j < nb; j++) { float x = a[r + j], y = b[j]; out[r + j] = OPEXPR; }     \
    } else {                                                                                       \
      for (int64_t r = 0; r < n; r += na)                                                          \
        for (int64_t j = 0; j < na; j++) { float x = a[j], y = b[r + j]; out[r + j] = OPEXPR; }     \
    }                                                                                              \
  } while (0)

/* One loop per op (DT_BINARY_OPS), each with its op a constant, so that the compiler folds the op
 * in and vectorises; a table indexed by the op picks it. */
typedef void (*binary_loop_fn)(const float *a, int64_t na, const float *b, int64_t nb, float *out,
                               int64_t n);
#define BINARY_LOOP_FN(OP)                                                                         \
  static void binary_loop_##OP(const float *a, int64_t na, const float *b, int64_t nb,              \
                               float *out, int64_t n) {                                            \
    BINARY_LOOP(dt_binary_apply(OP, x, y));                                                        \
  }
DT_BINARY_OPS(BINARY_LOOP_FN)
#define BINARY_LOOP_ENTRY(OP) [OP] = binary_loop_##OP,
static const binary_loop_fn binary_loops[DT_BINARY_LAST + 1] = {
    DT_BINARY_OPS(BINARY_LOOP_ENTRY)};

/* out[n] = a op b, where a has na and b has nb elements (each n, or a divisor of n). */
int dt_binary(int32_t op, const float *a, int64_t na, const float *b, int64_t nb, float *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  binary_loop_fn loop = dt_binary_known(op) ? binary_loops[op] : NULL;
  CHECK(loop != NULL, "dt_binary: unknown op %d", op);
  int status = dt_check_broadcast("dt_binary", na, nb, n);
  if (status) return status;
  loop(a, na, b, nb, out, n);
  return DT_OK;
}

/* The gradients of a binary op whose operands have out's shape: one pass, on the thread pool. */
typedef struct {
  const float *a, *b, *gy;
  float *ga, *gb;
} binary_backward_t;

/* One op's gradients over [begin, end) of distinct buffers (restrict); called with a constant op,
 * so that the rule folds in and the loop vectorises. */
static inline void binary_grads_loop(int32_t op, const float *restrict a, const float *restrict b,
                                     const float *restrict gy, float *restrict ga,
                                     float *restrict gb, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) {
    float dx, dy;
    dt_binary_grads(op, a[i], b[i], gy[i], &dx, &dy);
    if (ga) ga[i] = dx;
    if (gb) gb[i] = dy;
  }
}

/* The thread pool's task of each op, picked by the op as binary_loops is. */
#define BINARY_GRADS_RANGE(OP)                                                                     \
  static void binary_grads_range_##OP(void *ctx, int64_t begin, int64_t end) {                     \
    const binary_backward_t *j = ctx;                                                              \
    binary_grads_loop(OP, j->a, j->b, j->gy, j->ga, j->gb, begin, end);                            \
  }
DT_BINARY_OPS(BINARY_GRADS_RANGE)
#define BINARY_GRADS_ENTRY(OP) [OP] = binary_grads_range_##OP,
static const dt_range_fn binary_grads_ranges[DT_BINARY_LAST + 1] = {
    DT_BINARY_OPS(BINARY_GRADS_ENTRY)};

/* Gradients of out = a op b given gy[n]: ga[na] and gb[nb] (either may be NULL when not needed);
 * a broadcast operand's gradient sums over the repeats. */
int dt_binary_backward(int32_t op, const float *a, int64_t na, const float *b, int64_t nb,
                       const float *gy, int64_t n, float *ga, float *gb) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(gy);
  dt_range_fn range = dt_binary_known(op) ? binary_grads_ranges[op] : NULL;
  CHECK(range != NULL, "dt_binary_backward: unknown op %d", op);
  int status = dt_check_broadcast("dt_binary_backward", na, nb, n);
  if (status) return status;
  if (na == n && nb == n) {
    binary_backward_t job = {a, b, gy, ga, gb};
    dt_parallel_range(n, DT_MIN_RANGE, range, &job);
    return DT_OK;
  }
  if (ga && na < n) memset(ga, 0, (size_t)na * sizeof(float));
  if (gb && nb < n) memset(gb, 0, (size_t)nb * sizeof(float));
  for (int64_t i = 0; i < n; i++) {
    int64_t ia = na == n ? i : i % na, ib = nb == n ? i : i % nb;
    float dx, dy;
    dt_binary_grads(op, a[ia], b[ib], gy[i], &dx, &dy);
    if (ga) { if (na == n) ga[ia] = dx; else ga[ia] += dx; }
    if (gb) { if (nb == n) gb[ib] = dy; else gb[ib] += dy; }
  }
  return DT_OK;
}

/* ---------------------------------------------------------------- unary ops */

typedef struct {
  int32_t op;
  const float *x, *y, *gy;
  float *out;
  float p;
} map_t;

static void unary_range(void *ctx, int64_t begin, int64_t end) {
  const map_t *m = ctx;
  const float *x = m->x;
  float *y = m->out, p = m->p;
  if (m->op == DT_RELU) {
    for (int64_t i = begin; i < end; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  } else if (m->op == DT_SCALE) {
    for (int64_t i = begin; i < end; i++) y[i] = x[i] * p;
  } else if (m->op == DT_GELU_ERF) {
    for (int64_t i = begin; i < end; i++) y[i] = dt_unary_apply(DT_GELU_ERF, x[i], p);
  } else {
    for (int64_t i = begin; i < end; i++) y[i] = dt_unary_apply(m->op, x[i], p);
  }
}

int dt_unary(int32_t op, const float *x, float *y, int64_t n, float p) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CHECK(dt_unary_known(op), "dt_unary: unknown op %d", op);
  map_t m = {.op = op, .x = x, .out = y, .p = p};
  dt_parallel_range(n, DT_MIN_RANGE, unary_range, &m);
  return DT_OK;
}

static void unary_backward_range(void *ctx, int64_t begin, int64_t end) {
  const map_t *m = ctx;
  const float *x = m->x, *y = m->y, *gy = m->gy;
  float *gx = m->out, p = m->p;
  if (m->op == DT_RELU) {
    for (int64_t i = begin; i < end; i++) gx[i] = x[i] > 0.0f ? gy[i] : 0.0f;
  } else if (m->op == DT_GELU_ERF) {
    for (int64_t i = begin; i < end; i++) gx[i] = gy[i] * dt_unary_derivative(DT_GELU_ERF, x[i], 0.0f, p);
  } else {
    for (int64_t i = begin; i < end; i++)
      gx[i] = gy[i] * dt_unary_derivative(m->op, x ? x[i] : 0.0f, y ? y[i] : 0.0f, p);
  }
}

/* gx = gy * f'(x); x or y may be NULL when the op's derivative does not read it. */
int dt_unary_backward(int32_t op, const float *x, const float *y, const float *gy, float *gx,
                      int64_t n, float p) {
  CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  CHECK(dt_unary_known(op), "dt_unary_backward: unknown op %d", op);
  CHECK(!dt_unary_needs_y(op) || y != NULL, "dt_unary_backward: op %d needs the output y", op);
  CHECK(!dt_unary_needs_x(op) || x != NULL, "dt_unary_backward: op %d needs the input x", op);
  map_t m = {.op = op, .x = x, .y = y, .gy = gy, .out = gx, .p = p};
  dt_parallel_range(n, DT_MIN_RANGE, unary_backward_range, &m);
  return DT_OK;
}

int32_t dt_unary_reads(int32_t op) { return dt_unary_reads_of(op); }

typedef struct {
  float *y;
  const float *x;
  float alpha;
} axpy_t;

static void axpy_range(void *ctx, int64_t begin, int64_t end) {
  const axpy_t *a = ctx;
  float *restrict y = a->y;
  const float *restrict x = a->x;
  for (int64_t i = begin; i < end; i++) y[i] += a->alpha * x[i];
}

/* y += alpha * x: gradient accumulation (elementwise, so the same at any thread count). */
int dt_axpy(float *y, const float *x, int64_t n, float alpha) {
  CHECK_PTR(y); CHECK_PTR(x); CHECK_COUNT(n);
  axpy_t a = {y, x, alpha};
  dt_parallel_range(n, DT_MIN_RANGE, axpy_range, &a);
  return DT_OK;
}
