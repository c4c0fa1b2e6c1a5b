/* The per-element math that the CPU kernels (csrc/core) and the CUDA kernels (csrc/cuda) share,
 * written once so that both devices compute the same thing: the counter RNG, the unary and binary
 * ops with their derivatives, and which ops' backwards read the input x or the output y. Under
 * nvcc every function here is __host__ __device__; in C it is static inline, and the compiler
 * folds a constant op into the caller's loop and vectorises it. */
#ifndef DTRAIN_SCALAR_MATH_H
#define DTRAIN_SCALAR_MATH_H

#include <math.h>
#include <stdint.h>

#include "dtrain.h"

#ifdef __CUDACC__
#define DT_HOSTDEV static __forceinline__ __host__ __device__
#else
#define DT_HOSTDEV static inline
#endif

/* ---------------------------------------------------------------- counter RNG */

/* splitmix64 over seed and element index: the same seed and offset give the same numbers whatever
 * the thread count or call split, and on whichever device. */
DT_HOSTDEV uint64_t dt_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* A uniform float in [0, 1) from 24 random bits of the counter's hash. */
DT_HOSTDEV float dt_uniform01(uint64_t seed, uint64_t counter) {
  return (float)(dt_mix64(seed ^ dt_mix64(counter)) >> 40) * (1.0f / 16777216.0f);
}
/* An integer in [low, low + range) for 0 < range <= 2^32: the hash modulo range, whose bias (at
 * most range / 2^64) no test of uniformity could see, and which needs no rejection loop, so each
 * element depends on its counter alone. */
DT_HOSTDEV int64_t dt_randint_at(uint64_t seed, uint64_t counter, int64_t low, uint64_t range) {
  return low + (int64_t)(dt_mix64(seed ^ dt_mix64(counter)) % range);
}
/* A normal(mean, std) number by Box-Muller over the counters c and c + 1 (dt_randn takes two). */
DT_HOSTDEV float dt_normal(uint64_t seed, uint64_t c, float mean, float std) {
  float u1 = 1.0f - dt_uniform01(seed, c), u2 = dt_uniform01(seed, c + 1);
  return mean + std * sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}
/* Whether dropout with probability p keeps the element at `counter` (dt_dropout, attention). */
DT_HOSTDEV int dt_dropout_keeps(uint64_t seed, uint64_t counter, float p) {
  return dt_uniform01(seed, counter) >= p;
}

/* ---------------------------------------------------------------- erf and exp */

/* erf and the exp of a non-positive argument, the two functions GELU needs. The CPU uses
 * fast_exp.h's polynomials, which vectorise; the device uses CUDA's own, as fast there. */
#ifdef __CUDACC__
DT_HOSTDEV float dt_erff(float x) { return erff(x); }
DT_HOSTDEV float dt_exp_nonpos(float x) { return expf(x); }
/* erf(a) for a >= 0; the CPU's version reuses e = exp(-a * a), the device's needs no help. */
DT_HOSTDEV float dt_erf_nonneg(float a, float e) {
  (void)e;
  return erff(a);
}
#else
#include "fast_exp.h"
#endif

/* ---------------------------------------------------------------- binary ops */

/* Each switch on an op below names every member of its enum and has no default, and a member
 * without its case is a compile error (in C, under nvcc and in the host build alike). An op is a
 * member when it gets here: every kernel checks dt_binary_known or dt_unary_known first (in C++ a
 * number outside the enum may not even be cast to it). The value after each switch is unreachable,
 * NaN (INT32_MIN on i32) so that a slip would show. tests/ffi/op_codes_test.ts runs every op code
 * of ffi/dtrain.ts through each device's kernels. */
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
#ifdef __cplusplus
#define DT_STATIC_ASSERT static_assert
#else
#define DT_STATIC_ASSERT _Static_assert
#endif

/* The binary ops (BinaryOp in ffi/dtrain.ts). A new one is a member here (and DT_BINARY_LAST if it
 * is the last), its entry in DT_BINARY_OPS, and its cases in dt_binary_apply, dt_binary_grads and
 * dt_binary_i32_apply; the kernels of both devices follow from these. */
enum dt_binary_op { DT_ADD = 0, DT_SUB = 1, DT_MUL = 2, DT_DIV = 3 };
#define DT_BINARY_LAST DT_DIV

/* Every binary op, for the CPU kernels that compile one loop per op so that the compiler folds the
 * op in and vectorises (elementwise.c). */
#define DT_BINARY_OPS(X) X(DT_ADD) X(DT_SUB) X(DT_MUL) X(DT_DIV)
#define DT_COUNT_ONE(op) +1
DT_STATIC_ASSERT(0 DT_BINARY_OPS(DT_COUNT_ONE) == DT_BINARY_LAST + 1,
                 "DT_BINARY_OPS lists every member of enum dt_binary_op");

DT_HOSTDEV int dt_binary_known(int op) { return op >= DT_ADD && op <= DT_BINARY_LAST; }

/* a op b at one element. */
DT_HOSTDEV float dt_binary_apply(int op, float x, float y) {
  switch ((enum dt_binary_op)op) {
    case DT_ADD: return x + y;
    case DT_SUB: return x - y;
    case DT_MUL: return x * y;
    case DT_DIV: return x / y;
  }
  return NAN;
}

/* d(x op y)/dx * g and d(x op y)/dy * g at one element. */
DT_HOSTDEV void dt_binary_grads(int op, float x, float y, float g, float *dx, float *dy) {
  switch ((enum dt_binary_op)op) {
    case DT_ADD: *dx = g; *dy = g; return;
    case DT_SUB: *dx = g; *dy = -g; return;
    case DT_MUL: *dx = g * y; *dy = g * x; return;
    case DT_DIV: *dx = g / y; *dy = -g * x / (y * y); return;
  }
  *dx = *dy = NAN;
}

/* Whether the op divides by b, so that the i32 kernels refuse a zero b. */
DT_HOSTDEV int dt_binary_divides(int op) { return op == DT_DIV; }

/* a op b on i32 at one element, wrapping as PyTorch does (unsigned arithmetic wraps without
 * undefined behaviour). DT_DIV is floor division, as Python's and PyTorch's floor_divide; the
 * caller has refused a zero divisor (dt_binary_divides). */
DT_HOSTDEV int32_t dt_binary_i32_apply(int op, int32_t a, int32_t b) {
  uint32_t x = (uint32_t)a, y = (uint32_t)b;
  switch ((enum dt_binary_op)op) {
    case DT_ADD: return (int32_t)(x + y);
    case DT_SUB: return (int32_t)(x - y);
    case DT_MUL: return (int32_t)(x * y);
    case DT_DIV: {
      if (b == -1) return (int32_t)(0u - x); /* INT32_MIN / -1 overflows */
      int32_t q = a / b;
      return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
    }
  }
  return INT32_MIN;
}

/* ---------------------------------------------------------------- unary ops */

#define DT_SQRT_2_OVER_PI 0.7978845608028654f
#define DT_GELU_COEF 0.044715f
#define DT_INV_SQRT_2 0.7071067811865476f
#define DT_INV_SQRT_2PI 0.3989422804014327f

/* The unary ops. A new one is a member here (and in UnaryOp, ffi/dtrain.ts), a case in
 * dt_unary_apply and dt_unary_derivative, and its entry in dt_unary_needs_x or _y. */
enum dt_unary_op {
  DT_RELU = 0, DT_GELU_TANH = 1, DT_GELU_ERF = 2, DT_EXP = 3, DT_LOG = 4, DT_TANH = 5,
  DT_SIGMOID = 6, DT_NEG = 7, DT_SQRT = 8, DT_POW = 9, DT_SCALE = 10, DT_ADD_SCALAR = 11
};
#define DT_UNARY_LAST DT_ADD_SCALAR

DT_HOSTDEV int dt_unary_known(int op) { return op >= DT_RELU && op <= DT_UNARY_LAST; }

/* f(x) at one element (enum dt_unary_op); p is the exponent of DT_POW, the factor of DT_SCALE and
 * the addend of DT_ADD_SCALAR. */
DT_HOSTDEV float dt_unary_apply(int op, float x, float p) {
  switch ((enum dt_unary_op)op) {
    case DT_RELU: return x > 0.0f ? x : 0.0f;
    case DT_GELU_TANH:
      return 0.5f * x * (1.0f + tanhf(DT_SQRT_2_OVER_PI * (x + DT_GELU_COEF * x * x * x)));
    case DT_GELU_ERF: return 0.5f * x * (1.0f + dt_erff(x * DT_INV_SQRT_2));
    case DT_EXP: return expf(x);
    case DT_LOG: return logf(x);
    case DT_TANH: return tanhf(x);
    case DT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case DT_NEG: return -x;
    case DT_SQRT: return sqrtf(x);
    case DT_POW: return powf(x, p);
    case DT_SCALE: return x * p;
    case DT_ADD_SCALAR: return x + p;
  }
  return NAN;
}

/* Whether f'(x) reads the output y, and whether it reads the input x (dt_unary_backward takes
 * NULL for the one it does not need). */
DT_HOSTDEV int dt_unary_needs_y(int op) {
  return op == DT_EXP || op == DT_TANH || op == DT_SIGMOID || op == DT_SQRT;
}
DT_HOSTDEV int dt_unary_needs_x(int op) {
  return op == DT_RELU || op == DT_GELU_TANH || op == DT_GELU_ERF || op == DT_LOG || op == DT_POW;
}
/* dt_unary_reads' answer, so that autograd keeps only the tensor a backward reads (no op reads
 * both). */
DT_HOSTDEV int32_t dt_unary_reads_of(int op) {
  if (!dt_unary_known(op)) return -1;
  return dt_unary_needs_x(op) ? 1 : dt_unary_needs_y(op) ? 2 : 0;
}

/* f'(x), from the input x or the output y (whichever is cheaper). */
DT_HOSTDEV float dt_unary_derivative(int op, float x, float y, float p) {
  switch ((enum dt_unary_op)op) {
    case DT_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case DT_GELU_TANH: {
      float inner = DT_SQRT_2_OVER_PI * (x + DT_GELU_COEF * x * x * x);
      float t = tanhf(inner);
      return 0.5f * (1.0f + t) +
             0.5f * x * (1.0f - t * t) * DT_SQRT_2_OVER_PI * (1.0f + 3.0f * DT_GELU_COEF * x * x);
    }
    case DT_GELU_ERF: {
      /* exp(-x^2 / 2) is both erf's exp at x / sqrt(2) and the normal density's. */
      float a = (x < 0.0f ? -x : x) * DT_INV_SQRT_2, e = dt_exp_nonpos(-a * a);
      float erf = dt_erf_nonneg(a, e);
      return 0.5f * (1.0f + (x < 0.0f ? -erf : erf)) + x * DT_INV_SQRT_2PI * e;
    }
    case DT_EXP: return y;
    case DT_LOG: return 1.0f / x;
    case DT_TANH: return 1.0f - y * y;
    case DT_SIGMOID: return y * (1.0f - y);
    case DT_NEG: return -1.0f;
    case DT_SQRT: return 0.5f / y;
    case DT_POW: return p == 0.0f ? 0.0f : p * powf(x, p - 1.0f);
    case DT_SCALE: return p;
    case DT_ADD_SCALAR: return 1.0f;
  }
  return NAN;
}

#pragma GCC diagnostic pop

#endif
