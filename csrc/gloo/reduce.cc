// Reduction kernels for f32 and i32. Compiled at O3 so the loops vectorize even though the
// Makefile builds the shim at O2: reductions are on the all-reduce critical path.
#pragma GCC optimize("O3")

#include <cstdint>

#include "internal.h"

namespace dtrain {

namespace {

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

template <typename T>
ReduceFn pick(int op) {
  switch (op) {
    case DT_SUM:
    case DT_AVG:
      return reduce<T, Sum>;
    case DT_PROD:
      return reduce<T, Prod>;
    case DT_MIN:
      return reduce<T, Min>;
    case DT_MAX:
      return reduce<T, Max>;
    default:
      return nullptr;
  }
}

}  // namespace

ReduceFn reduceFn(int dtype, int op) {
  switch (dtype) {
    case DT_F32:
      return pick<float>(op);
    case DT_I32:
      return pick<int32_t>(op);
    default:
      return nullptr;
  }
}

void divideInPlace(float* buf, size_t n, int divisor) {
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < n; i++) buf[i] /= d;
}

}  // namespace dtrain
