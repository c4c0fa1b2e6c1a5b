/* The operand-size checks that the CPU kernels and the CUDA kernels (csrc/cuda) share: a shorter
 * operand's shape is a suffix of the output's, so its elements repeat every `na` (or `nb`) output
 * elements. Each returns DT_OK, or DT_EINVAL with a message naming `fn` and the sizes. */
#ifndef DTRAIN_BROADCAST_H
#define DTRAIN_BROADCAST_H

#include "dtrain.h"

/* The float binary ops (elementwise.c): one operand has all n elements, the other n or a divisor. */
static inline int dt_check_broadcast(const char *fn, int64_t na, int64_t nb, int64_t n) {
  CHECK(na >= 0 && nb >= 0 && n >= 0, "%s: negative size", fn);
  CHECK((na == n || (na > 0 && n % na == 0 && nb == n)) && (nb == n || (nb > 0 && n % nb == 0 && na == n)),
        "%s: operands of %lld and %lld elements do not broadcast to %lld", fn, (long long)na,
        (long long)nb, (long long)n);
  return DT_OK;
}

/* The bool and i32 ops (compare.c): each operand has n elements or a divisor of n. */
static inline int dt_check_repeat(const char *fn, int64_t na, int64_t nb, int64_t n) {
  CHECK(n >= 0 && na >= 0 && nb >= 0, "%s: negative count", fn);
  CHECK((na == n || (na > 0 && n % na == 0)) && (nb == n || (nb > 0 && n % nb == 0)),
        "%s: operands of %lld and %lld elements do not broadcast to %lld", fn, (long long)na,
        (long long)nb, (long long)n);
  return DT_OK;
}

#endif
