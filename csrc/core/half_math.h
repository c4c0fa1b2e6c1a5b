/* f32 to and from bf16 and f16, per element, in integer arithmetic: written once for the CPU
 * kernels (half.c) and the CUDA ones (csrc/cuda/half.cu), so that every device rounds to the
 * same bits, PyTorch's CPU bits (tests/fixtures/gen_half.py). Integer code rather than
 * `_Float16` or cuda_fp16.h: the NaN rules below are PyTorch's, not each compiler's. */
#ifndef DTRAIN_HALF_MATH_H
#define DTRAIN_HALF_MATH_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define DT_HALF_FN static __forceinline__ __host__ __device__
#else
#define DT_HALF_FN static inline
#endif

DT_HALF_FN uint32_t dt_f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

DT_HALF_FN float dt_bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* Round to nearest even on the top 16 bits; every NaN is 0xFFFF, as PyTorch's vectorised CPU
 * conversion writes it (its scalar c10::BFloat16 writes 0x7FC0, but no tensor conversion on a
 * CPU reaches that path). Finite values past bf16's largest round to infinity. */
DT_HALF_FN uint16_t dt_f32_to_bf16(float f) {
  uint32_t u = dt_f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFFu;
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Exact: bf16 is f32's top half. */
DT_HALF_FN float dt_bf16_to_f32(uint16_t h) { return dt_bits_f32((uint32_t)h << 16); }

/* Round to nearest even, as F16C's vcvtps2ph: overflow (from 65520 up) to infinity, f16
 * subnormals kept, f32 subnormals to zero, NaN quiet with its top payload bits and sign. */
DT_HALF_FN uint16_t dt_f32_to_f16(float f) {
  uint32_t u = dt_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);
  if (a >= 0x38800000u) { /* normal: rebias the exponent from 127 to 15, then round */
    uint32_t m = a - 0x38000000u;
    m += 0xFFFu + ((m >> 13) & 1u);
    return (uint16_t)(sign | (m >> 13));
  }
  uint32_t e = a >> 23; /* a subnormal f16: the significand shifted to units of 2^-24 */
  if (e < 102u) return sign;
  uint32_t mant = (a & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
  uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) r++;
  return (uint16_t)(sign | r);
}

/* Exact; a NaN keeps its payload and becomes quiet, as vcvtph2ps does. */
DT_HALF_FN float dt_f16_to_f32(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16, e = ((uint32_t)h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1Fu) return dt_bits_f32(sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e == 0u) return dt_bits_f32(sign | dt_f32_bits((float)m * 5.9604644775390625e-8f));
  return dt_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
