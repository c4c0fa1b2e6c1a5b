/* The element kernels of the stand-in's reductions: acc = acc (op) x, over the five dtypes dtrain
 * hands NCCL. A reduction over n ranks folds their inputs in rank order (ops.cc), so every rank
 * computes the same bits; bf16 and f16 go through f32 and are rounded back after every step, as
 * NCCL's kernels add two halves in their own type (csrc/gloo/reduce.cc, [Note: half reductions]),
 * with dtrain's own conversions (csrc/core/half_math.h), so the bits also match dtrain's Gloo
 * backend. Integers wrap, as on the GPU. */
#include <stdint.h>

#include "../../../../csrc/core/half_math.h"
#include "standin.h"

namespace nccl_standin {

namespace {

struct Bf16 {
  static float load(uint16_t h) { return dt_bf16_to_f32(h); }
  static uint16_t store(float f) { return dt_f32_to_bf16(f); }
};
struct F16 {
  static float load(uint16_t h) { return dt_f16_to_f32(h); }
  static uint16_t store(float f) { return dt_f32_to_f16(f); }
};

/* Sum and product of integers through unsigned arithmetic: wrapping is defined there. */
struct Sum {
  static float apply(float a, float b) { return a + b; }
  static int32_t apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
  static uint8_t apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>(a + b); }
};
struct Prod {
  static float apply(float a, float b) { return a * b; }
  static int32_t apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
  }
  static uint8_t apply(uint8_t a, uint8_t b) { return static_cast<uint8_t>(a * b); }
};
/* The comparisons of dtrain's Gloo backend (csrc/gloo/reduce.cc). */
struct Min {
  template <typename T>
  static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) { return a < b ? b : a; }
};

template <typename T, typename Op>
void fold(void *acc, const void *x, size_t n) {
  T *a = static_cast<T *>(acc);
  const T *b = static_cast<const T *>(x);
  for (size_t i = 0; i < n; i++) a[i] = Op::apply(a[i], b[i]);
}

/* One rounding per element and step. */
template <typename H, typename Op>
void fold_half(void *acc, const void *x, size_t n) {
  uint16_t *a = static_cast<uint16_t *>(acc);
  const uint16_t *b = static_cast<const uint16_t *>(x);
  for (size_t i = 0; i < n; i++) a[i] = H::store(Op::apply(H::load(a[i]), H::load(b[i])));
}

template <typename Op>
FoldFn pick(int dtype) {
  switch (dtype) {
    case ncclUint8: return fold<uint8_t, Op>;
    case ncclInt32: return fold<int32_t, Op>;
    case ncclFloat32: return fold<float, Op>;
    case ncclFloat16: return fold_half<F16, Op>;
    case ncclBfloat16: return fold_half<Bf16, Op>;
    default: return nullptr;
  }
}

template <typename H>
void divide_half(void *acc, size_t n, float d) {
  uint16_t *a = static_cast<uint16_t *>(acc);
  for (size_t i = 0; i < n; i++) a[i] = H::store(H::load(a[i]) / d);
}

template <typename T>
void divide_int(void *acc, size_t n, int d) {
  T *a = static_cast<T *>(acc);
  for (size_t i = 0; i < n; i++) a[i] = static_cast<T>(a[i] / d);
}

}  // namespace

size_t dtype_size(int dtype) {
  switch (dtype) {
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclFloat32: return 4;
    default: return 0;
  }
}

const char *dtype_name(int dtype) {
  switch (dtype) {
    case ncclUint8: return "ncclUint8";
    case ncclInt32: return "ncclInt32";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclBfloat16: return "ncclBfloat16";
    default: return "an unknown dtype";
  }
}

bool op_known(int op) { return op >= ncclSum && op <= ncclAvg; }

FoldFn fold_fn(int dtype, int op) {
  switch (op) {
    case ncclSum:
    case ncclAvg: return pick<Sum>(dtype);
    case ncclProd: return pick<Prod>(dtype);
    case ncclMax: return pick<Max>(dtype);
    case ncclMin: return pick<Min>(dtype);
    default: return nullptr;
  }
}

/* The average as dtrain's Gloo backend computes it: the rounded sum divided in f32 (halves) or in
 * the type itself (f32; integers truncate), rounded again. Real NCCL multiplies each float input
 * by 1/n before summing (ncclDevPreMulSum): the same bits when n is a power of two (barring
 * underflow), not always otherwise. */
void divide(void *acc, size_t n, int dtype, int divisor) {
  const float d = static_cast<float>(divisor);
  switch (dtype) {
    case ncclFloat32: {
      float *a = static_cast<float *>(acc);
      for (size_t i = 0; i < n; i++) a[i] /= d;
      return;
    }
    case ncclFloat16: return divide_half<F16>(acc, n, d);
    case ncclBfloat16: return divide_half<Bf16>(acc, n, d);
    case ncclInt32: return divide_int<int32_t>(acc, n, divisor);
    case ncclUint8: return divide_int<uint8_t>(acc, n, divisor);
    default: return;
  }
}

}  // namespace nccl_standin
