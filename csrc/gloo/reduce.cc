// Reduction kernels for f32, i32, bf16 and f16. Compiled at O3 so the loops vectorize even though
// the Makefile builds the shim at O2: reductions are on the all-reduce critical path.
#pragma GCC optimize("O3")

#include <cstdint>
#include <type_traits>

#include "../core/half_math.h"
#include "internal.h"

namespace dtrain {

namespace {

// [Note: half reductions]
// A bf16 or f16 reduction widens both operands to f32 (exactly), applies the op in f32 and
// rounds the result back to the 2-byte type (to nearest even, csrc/core/half_math.h): one
// rounding per pair. A reduction over n ranks is n-1 such steps, each rounding, as NCCL's and
// PyTorch's Gloo (c10::BFloat16's operator+) sums are; they differ only in the order of the
// steps, which is the ring's in theirs and rank order in ours (every staged reduction here folds
// rank 0, 1, 2, ... in turn), so that every rank computes the same bits. Avg is the rounded sum
// divided in f32 by the group size and rounded again, as PyTorch's Gloo divides a bf16 tensor.
struct Bf16 {
  static float load(uint16_t h) { return dt_bf16_to_f32(h); }
  static uint16_t store(float f) { return dt_f32_to_bf16(f); }
};
struct F16 {
  static float load(uint16_t h) { return dt_f16_to_f32(h); }
  static uint16_t store(float f) { return dt_f32_to_f16(f); }
};

struct Sum {
  static float apply(float a, float b) { return a + b; }
  // Two's-complement wraparound, defined by going through uint32_t.
  static int32_t apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
};
struct Prod {
  static float apply(float a, float b) { return a * b; }
  static int32_t apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
  }
};
struct Min {
  template <typename T>
  static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) { return a < b ? b : a; }
};

template <typename T, typename Op>
void reduce(void* out, const void* a, const void* b, size_t n) {
  auto o = static_cast<T*>(out);
  auto x = static_cast<const T*>(a);
  auto y = static_cast<const T*>(b);
  // Each lane reads x[i], y[i] before writing o[i], so aliasing o with x or y is safe.
#pragma GCC ivdep
  for (size_t i = 0; i < n; i++) o[i] = Op::apply(x[i], y[i]);
}

// The same over 2-byte elements, through f32, one rounding per element ([Note: half
// reductions]).
template <typename H, typename Op>
void reduceHalf(void* out, const void* a, const void* b, size_t n) {
  auto o = static_cast<uint16_t*>(out);
  auto x = static_cast<const uint16_t*>(a);
  auto y = static_cast<const uint16_t*>(b);
#pragma GCC ivdep
  for (size_t i = 0; i < n; i++) o[i] = H::store(Op::apply(H::load(x[i]), H::load(y[i])));
}

// The kernel of `Op` over elements `T`: f32 and i32 directly, Bf16 and F16 through f32.
template <typename Op, typename T>
ReduceFn kernel() {
  if constexpr (std::is_same_v<T, Bf16> || std::is_same_v<T, F16>) {
    return reduceHalf<T, Op>;
  } else {
    return reduce<T, Op>;
  }
}

template <typename T>
ReduceFn pick(int op) {
  switch (op) {
    case DT_SUM:
    case DT_AVG:
      return kernel<Sum, T>();
    case DT_PROD:
      return kernel<Prod, T>();
    case DT_MIN:
      return kernel<Min, T>();
    case DT_MAX:
      return kernel<Max, T>();
    default:
      return nullptr;
  }
}

template <typename H>
void divideHalf(void* buf, size_t n, float d) {
  auto p = static_cast<uint16_t*>(buf);
  for (size_t i = 0; i < n; i++) p[i] = H::store(H::load(p[i]) / d);
}

}  // namespace

ReduceFn reduceFn(int dtype, int op) {
  switch (dtype) {
    case DT_F32:
      return pick<float>(op);
    case DT_I32:
      return pick<int32_t>(op);
    case DT_BF16:
      return pick<Bf16>(op);
    case DT_F16:
      return pick<F16>(op);
    default:
      return nullptr;
  }
}

bool isFloatDtype(int dtype) { return dtype == DT_F32 || dtype == DT_BF16 || dtype == DT_F16; }

void divideInPlace(void* buf, size_t n, int dtype, int divisor) {
  const float d = static_cast<float>(divisor);
  if (dtype == DT_BF16) return divideHalf<Bf16>(buf, n, d);
  if (dtype == DT_F16) return divideHalf<F16>(buf, n, d);
  auto p = static_cast<float*>(buf);
  for (size_t i = 0; i < n; i++) p[i] /= d;
}

}  // namespace dtrain
