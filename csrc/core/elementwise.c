/* Elementwise kernels: fills, copies, casts, unary and binary maps and their backwards.
 * Binary operands broadcast over leading dimensions: the shorter operand's shape is a suffix of
 * the output's, so its elements repeat every `nb` (or `na`) output elements. */
#include <math.h>
#include <string.h>

#include "dtrain.h"
#include "fast_exp.h"

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

int dt_cast_i32_f32(const int32_t *src, float *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
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

static int check_broadcast(const char *fn, int64_t na, int64_t nb, int64_t n) {
  CHECK(na >= 0 && nb >= 0 && n >= 0, "%s: negative size", fn);
  CHECK((na == n || (na > 0 && n % na == 0 && nb == n)) && (nb == n || (nb > 0 && n % nb == 0 && na == n)),
        "%s: operands of %lld and %lld elements do not broadcast to %lld", fn, (long long)na,
        (long long)nb, (long long)n);
  return DT_OK;
}

/* out[n] = a op b, where a has na and b has nb elements (each n, or a divisor of n). */
int dt_binary(int32_t op, const float *a, int64_t na, const float *b, int64_t nb, float *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(op >= DT_ADD && op <= DT_DIV, "dt_binary: unknown op %d", op);
  int status = check_broadcast("dt_binary", na, nb, n);
  if (status) return status;
  switch (op) {
    case DT_ADD: BINARY_LOOP(x + y); break;
    case DT_SUB: BINARY_LOOP(x - y); break;
    case DT_MUL: BINARY_LOOP(x * y); break;
    default: BINARY_LOOP(x / y); break;
  }
  return DT_OK;
}

/* The gradients of a binary op whose operands have out's shape: one pass, on the thread pool. */
typedef struct {
  int32_t op;
  const float *a, *b, *gy;
  float *ga, *gb;
} binary_backward_t;

/* d(a op b)/da * g and d(a op b)/db * g at one element: the one place the binary rules live. */
static inline void binary_grads(int32_t op, float x, float y, float g, float *dx, float *dy) {
  switch (op) {
    case DT_ADD: *dx = g; *dy = g; break;
    case DT_SUB: *dx = g; *dy = -g; break;
    case DT_MUL: *dx = g * y; *dy = g * x; break;
    default: *dx = g / y; *dy = -g * x / (y * y); break;
  }
}

/* One op's gradients over [begin, end) of distinct buffers (restrict); called with a constant op,
 * so that the rule folds in and the loop vectorises. */
static inline void binary_grads_loop(int32_t op, const float *restrict a, const float *restrict b,
                                     const float *restrict gy, float *restrict ga,
                                     float *restrict gb, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) {
    float dx, dy;
    binary_grads(op, a[i], b[i], gy[i], &dx, &dy);
    if (ga) ga[i] = dx;
    if (gb) gb[i] = dy;
  }
}

static void binary_backward_range(void *ctx, int64_t begin, int64_t end) {
  const binary_backward_t *j = ctx;
  switch (j->op) {
    case DT_ADD: binary_grads_loop(DT_ADD, j->a, j->b, j->gy, j->ga, j->gb, begin, end); break;
    case DT_SUB: binary_grads_loop(DT_SUB, j->a, j->b, j->gy, j->ga, j->gb, begin, end); break;
    case DT_MUL: binary_grads_loop(DT_MUL, j->a, j->b, j->gy, j->ga, j->gb, begin, end); break;
    default: binary_grads_loop(DT_DIV, j->a, j->b, j->gy, j->ga, j->gb, begin, end); break;
  }
}

/* Gradients of out = a op b given gy[n]: ga[na] and gb[nb] (either may be NULL when not needed);
 * a broadcast operand's gradient sums over the repeats. */
int dt_binary_backward(int32_t op, const float *a, int64_t na, const float *b, int64_t nb,
                       const float *gy, int64_t n, float *ga, float *gb) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(gy);
  CHECK(op >= DT_ADD && op <= DT_DIV, "dt_binary_backward: unknown op %d", op);
  int status = check_broadcast("dt_binary_backward", na, nb, n);
  if (status) return status;
  if (na == n && nb == n) {
    binary_backward_t job = {op, a, b, gy, ga, gb};
    dt_parallel_range(n, DT_MIN_RANGE, binary_backward_range, &job);
    return DT_OK;
  }
  if (ga && na < n) memset(ga, 0, (size_t)na * sizeof(float));
  if (gb && nb < n) memset(gb, 0, (size_t)nb * sizeof(float));
  for (int64_t i = 0; i < n; i++) {
    int64_t ia = na == n ? i : i % na, ib = nb == n ? i : i % nb;
    float dx, dy;
    binary_grads(op, a[ia], b[ib], gy[i], &dx, &dy);
    if (ga) { if (na == n) ga[ia] = dx; else ga[ia] += dx; }
    if (gb) { if (nb == n) gb[ib] = dy; else gb[ib] += dy; }
  }
  return DT_OK;
}

/* ---------------------------------------------------------------- unary ops */

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_COEF 0.044715f
#define INV_SQRT_2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

static inline float apply_unary(int op, float x, float p) {
  switch (op) {
    case DT_RELU: return x > 0.0f ? x : 0.0f;
    case DT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * (x + GELU_COEF * x * x * x)));
    case DT_GELU_ERF: return 0.5f * x * (1.0f + dt_erff(x * INV_SQRT_2));
    case DT_EXP: return expf(x);
    case DT_LOG: return logf(x);
    case DT_TANH: return tanhf(x);
    case DT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case DT_NEG: return -x;
    case DT_SQRT: return sqrtf(x);
    case DT_POW: return powf(x, p);
    case DT_SCALE: return x * p;
    default: return x + p;
  }
}

/* d out / d x, from the input x and the output y (whichever is cheaper). */
static inline float unary_derivative(int op, float x, float y, float p) {
  switch (op) {
    case DT_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case DT_GELU_TANH: {
      float inner = SQRT_2_OVER_PI * (x + GELU_COEF * x * x * x);
      float t = tanhf(inner);
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_COEF * x * x);
    }
    case DT_GELU_ERF: {
      /* exp(-x^2 / 2) is both erf's exp at x / sqrt(2) and the normal density's. */
      float a = (x < 0.0f ? -x : x) * INV_SQRT_2, e = dt_exp_nonpos(-a * a);
      float erf = dt_erf_nonneg(a, e);
      return 0.5f * (1.0f + (x < 0.0f ? -erf : erf)) + x * INV_SQRT_2PI * e;
    }
    case DT_EXP: return y;
    case DT_LOG: return 1.0f / x;
    case DT_TANH: return 1.0f - y * y;
    case DT_SIGMOID: return y * (1.0f - y);
    case DT_NEG: return -1.0f;
    case DT_SQRT: return 0.5f / y;
    case DT_POW: return p == 0.0f ? 0.0f : p * powf(x, p - 1.0f);
    case DT_SCALE: return p;
    default: return 1.0f;
  }
}

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
    for (int64_t i = begin; i < end; i++) y[i] = apply_unary(DT_GELU_ERF, x[i], p);
  } else {
    for (int64_t i = begin; i < end; i++) y[i] = apply_unary(m->op, x[i], p);
  }
}

int dt_unary(int32_t op, const float *x, float *y, int64_t n, float p) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CHECK(op >= DT_RELU && op <= DT_ADD_SCALAR, "dt_unary: unknown op %d", op);
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
    for (int64_t i = begin; i < end; i++) gx[i] = gy[i] * unary_derivative(DT_GELU_ERF, x[i], 0.0f, p);
  } else {
    for (int64_t i = begin; i < end; i++)
      gx[i] = gy[i] * unary_derivative(m->op, x ? x[i] : 0.0f, y ? y[i] : 0.0f, p);
  }
}

/* gx = gy * f'(x); x or y may be NULL when the op's derivative does not read it. */
int dt_unary_backward(int32_t op, const float *x, const float *y, const float *gy, float *gx,
                      int64_t n, float p) {
  CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  CHECK(op >= DT_RELU && op <= DT_ADD_SCALAR, "dt_unary_backward: unknown op %d", op);
  int needs_y = op == DT_EXP || op == DT_TANH || op == DT_SIGMOID || op == DT_SQRT;
  int needs_x = op == DT_RELU || op == DT_GELU_TANH || op == DT_GELU_ERF || op == DT_LOG || op == DT_POW;
  CHECK(!needs_y || y != NULL, "dt_unary_backward: op %d needs the output y", op);
  CHECK(!needs_x || x != NULL, "dt_unary_backward: op %d needs the input x", op);
  map_t m = {.op = op, .x = x, .y = y, .gy = gy, .out = gx, .p = p};
  dt_parallel_range(n, DT_MIN_RANGE, unary_backward_range, &m);
  return DT_OK;
}

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
