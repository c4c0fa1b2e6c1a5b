/* Kernels of the bool and i32 dtypes: comparisons giving bool (1 byte a element, 0 or 1), casts
 * to and from bool, integer arithmetic and sums (a count of true elements).
 * Binary operands broadcast as in elementwise.c: a shorter operand's elements repeat every `na`
 * (or `nb`) output elements. */
#include <math.h>
#include <string.h>

#include "broadcast.h"
#include "dtrain.h"
#include "scalar_math.h"

/* One running position per operand, wrapped instead of a division per element; the common
 * shapes (equal, or a scalar on the right) get loops the compiler vectorises. */
#define COMPARE_LOOP(T, CMP)                                                                       \
  do {                                                                                             \
    const T *restrict x = c->a, *restrict y = c->b;                                                \
    uint8_t *restrict out = c->out;                                                                \
    if (c->na == c->n && c->nb == c->n) {                                                          \
      for (int64_t i = begin; i < end; i++) { T u = x[i], v = y[i]; out[i] = (uint8_t)(CMP); }     \
    } else if (c->na == c->n && c->nb == 1) {                                                      \
      const T v = y[0];                                                                            \
      for (int64_t i = begin; i < end; i++) { T u = x[i]; out[i] = (uint8_t)(CMP); }               \
    } else {                                                                                       \
      int64_t ja = begin % c->na, jb = begin % c->nb;                                              \
      for (int64_t i = begin; i < end; i++) {                                                      \
        T u = x[ja], v = y[jb];                                                                    \
        out[i] = (uint8_t)(CMP);                                                                   \
        if (++ja == c->na) ja = 0;                                                                 \
        if (++jb == c->nb) jb = 0;                                                                 \
      }                                                                                            \
    }                                                                                              \
  } while (0)

#define COMPARE_OPS(T)                                                                             \
  switch (c->op) {                                                                                 \
    case DT_EQ: COMPARE_LOOP(T, u == v); break;                                                    \
    case DT_NE: COMPARE_LOOP(T, u != v); break;                                                    \
    case DT_LT: COMPARE_LOOP(T, u < v); break;                                                     \
    case DT_LE: COMPARE_LOOP(T, u <= v); break;                                                    \
    case DT_GT: COMPARE_LOOP(T, u > v); break;                                                     \
    default: COMPARE_LOOP(T, u >= v); break;                                                       \
  }

/* Elements per task: below this a thread hand-off costs more than the comparisons. */
#define GRAIN 65536

typedef struct {
  int32_t op, dtype;
  const void *a, *b;
  int64_t na, nb, n;
  uint8_t *out;
} compare_job;

static void compare_task(void *ctx, int64_t t) {
  const compare_job *c = ctx;
  int64_t begin = t * GRAIN, end = begin + GRAIN < c->n ? begin + GRAIN : c->n;
  if (c->dtype == DT_F32) { COMPARE_OPS(float) }
  else if (c->dtype == DT_I32) { COMPARE_OPS(int32_t) }
  else { COMPARE_OPS(uint8_t) }
}

/* out[i] = a op b (1 or 0), both operands of `dtype`. */
int dt_compare(int32_t op, int32_t dtype, const void *a, int64_t na, const void *b, int64_t nb,
               uint8_t *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(op >= DT_EQ && op <= DT_GE, "dt_compare: unknown op %d", op);
  CHECK(dtype >= DT_F32 && dtype <= DT_BOOL, "dt_compare: unknown dtype %d", dtype);
  int status = dt_check_repeat("dt_compare", na, nb, n);
  if (status) return status;
  compare_job c = {op, dtype, a, b, na, nb, n, out};
  dt_parallel((n + GRAIN - 1) / GRAIN, compare_task, &c);
  return DT_OK;
}

static int elem_size(int32_t dtype) { return dtype == DT_BOOL ? 1 : 4; }

/* Converts n elements between any two dtypes; anything non-zero becomes true, true becomes 1. */
int dt_cast(const void *src, int32_t src_dtype, void *dst, int32_t dst_dtype, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(src_dtype >= DT_F32 && src_dtype <= DT_BOOL, "dt_cast: unknown source dtype %d", src_dtype);
  CHECK(dst_dtype >= DT_F32 && dst_dtype <= DT_BOOL, "dt_cast: unknown target dtype %d", dst_dtype);
  if (src_dtype == dst_dtype) {
    memmove(dst, src, (size_t)(n * elem_size(src_dtype)));
    return DT_OK;
  }
  if (dst_dtype == DT_BOOL) {
    uint8_t *o = dst;
    if (src_dtype == DT_F32) for (int64_t i = 0; i < n; i++) o[i] = ((const float *)src)[i] != 0.0f;
    else for (int64_t i = 0; i < n; i++) o[i] = ((const int32_t *)src)[i] != 0;
    return DT_OK;
  }
  CHECK(src_dtype == DT_BOOL, "dt_cast: f32 and i32 convert with dt_cast_f32_i32 / dt_cast_i32_f32");
  const uint8_t *s = src;
  if (dst_dtype == DT_F32) for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = s[i] ? 1.0f : 0.0f;
  else for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = s[i] ? 1 : 0;
  return DT_OK;
}

int dt_fill_u8(uint8_t *dst, int64_t n, int32_t value) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  memset(dst, value ? 1 : 0, (size_t)n);
  return DT_OK;
}

/* out[o, i] = sum over a of x[o, a, i] for i32 or bool x (a count of true elements), in 64 bits
 * and saturated to the i32 range. */
int dt_sum_axis_int(const void *x, int32_t dtype, int32_t *out, int64_t outer, int64_t axis,
                    int64_t inner) {
  CHECK_PTR(x); CHECK_PTR(out); CHECK_COUNT(outer); CHECK_COUNT(axis); CHECK_COUNT(inner);
  CHECK(dtype == DT_I32 || dtype == DT_BOOL, "dt_sum_axis_int: dtype %d is not i32 or bool", dtype);
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t total = 0;
      for (int64_t k = 0; k < axis; k++) {
        int64_t at = (o * axis + k) * inner + i;
        total += dtype == DT_I32 ? ((const int32_t *)x)[at] : ((const uint8_t *)x)[at];
      }
      out[o * inner + i] = total > INT32_MAX ? INT32_MAX : total < INT32_MIN ? INT32_MIN : (int32_t)total;
    }
  }
  return DT_OK;
}

/* out = a op b on i32 (enum dt_binary_op, dt_binary_i32_apply: DT_DIV is floor division),
 * wrapping like PyTorch. */
int dt_binary_i32(int32_t op, const int32_t *a, int64_t na, const int32_t *b, int64_t nb,
                  int32_t *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(dt_binary_known(op), "dt_binary_i32: unknown op %d", op);
  int status = dt_check_repeat("dt_binary_i32", na, nb, n);
  if (status) return status;
  for (int64_t i = 0; i < n; i++) {
    int32_t x = a[na == n ? i : i % na], y = b[nb == n ? i : i % nb];
    CHECK(y != 0 || !dt_binary_divides(op), "dt_binary_i32: integer division by zero (element %lld)",
          (long long)i);
    out[i] = dt_binary_i32_apply(op, x, y);
  }
  return DT_OK;
}
