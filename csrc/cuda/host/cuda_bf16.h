/* bfloat16 as the host build's kernels see it: the storage type and the conversions csrc/cuda
 * uses, rounding as cuda_bf16.h does (to nearest, ties to even; NaN stays NaN). */
#pragma once

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
  uint16_t bits;
};

static inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  __nv_bfloat16 r;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    r.bits = (uint16_t)((u >> 16) | 0x40); /* a quiet NaN */
  } else {
    r.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return r;
}

static inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t u = (uint32_t)h.bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
