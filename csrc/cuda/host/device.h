/* The CUDA built-ins csrc/cuda's kernels use, for the host build ([Note: the host build] in
 * cuda_runtime.h): the qualifiers, the thread and block coordinates, __syncthreads, warp shuffles
 * and votes, atomics and the math intrinsics. A block's threads are fibers on the stream's thread
 * (blocks.cc): each runs until it reaches a barrier or a warp operation. One grid runs at a time in
 * the process ([Note: one grid at a time] in blocks.cc), so `__shared__` is a plain static, which
 * the block's fibers share as a block's threads share theirs. */
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict

namespace dt_host {

/* The block the stream's thread runs now: its coordinates, the grid's, and the block's size. */
struct block_coordinates {
  dim3 block_idx, block_dim, grid_dim;
};
extern const block_coordinates *current_block;
/* The running fiber's threadIdx. */
extern const dim3 *current_thread;

/* __syncthreads: waits until every thread of the block that has not returned reaches a barrier. */
void sync_block(void);
/* __syncwarp: waits for the lanes of the calling thread's warp that have not returned. */
void sync_warp(void);
/* The calling thread's lane (its linear index in the block, modulo 32). */
int lane_id(void);
/* Deposits `mine`, waits for the warp, and returns what lane `src` deposited (its own value when
 * `src` is outside the warp or has returned, which CUDA leaves undefined). */
uint64_t warp_exchange(uint64_t mine, int src);
/* Bit i set when lane i of the calling thread's warp passed a non-zero predicate. */
unsigned warp_ballot(int predicate);

} // namespace dt_host

#define threadIdx (*dt_host::current_thread)
#define blockIdx (dt_host::current_block->block_idx)
#define blockDim (dt_host::current_block->block_dim)
#define gridDim (dt_host::current_block->grid_dim)
constexpr int warpSize = 32;

inline void __syncthreads(void) { dt_host::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  dt_host::sync_warp();
}
inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ---------------------------------------------------------------- warp shuffles and votes */

template <typename T> inline T dt_host_shuffle_from(T v, int src) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  bits = dt_host::warp_exchange(bits, src);
  T out;
  memcpy(&out, &bits, sizeof(T));
  return out;
}
/* The source lane within a segment of `width` lanes, or -1 (keep one's own value). */
inline int dt_host_segment_lane(int lane, int offset_in_segment, int width) {
  if (offset_in_segment < 0 || offset_in_segment >= width) return -1;
  return (lane & ~(width - 1)) + offset_in_segment;
}
template <typename T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  (void)mask;
  int lane = dt_host::lane_id();
  return dt_host_shuffle_from(v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  (void)mask;
  int lane = dt_host::lane_id();
  return dt_host_shuffle_from(v, dt_host_segment_lane(lane, (lane & (width - 1)) ^ lane_mask, width));
}
template <typename T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)mask;
  int lane = dt_host::lane_id();
  return dt_host_shuffle_from(v, dt_host_segment_lane(lane, (lane & (width - 1)) + (int)delta, width));
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)mask;
  int lane = dt_host::lane_id();
  return dt_host_shuffle_from(v, dt_host_segment_lane(lane, (lane & (width - 1)) - (int)delta, width));
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return dt_host::warp_ballot(predicate) & mask;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) {
  unsigned live = __ballot_sync(mask, 1);
  return __ballot_sync(mask, predicate) == live;
}

/* ---------------------------------------------------------------- atomics */

/* Blocks of a grid run one after another on the stream's thread, but two streams' kernels may run
 * at once on two threads, so the atomics are the CPU's. */
template <typename T> inline T dt_host_atomic_add(T *address, T value) {
  return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}
inline int atomicAdd(int *a, int v) { return dt_host_atomic_add(a, v); }
inline unsigned atomicAdd(unsigned *a, unsigned v) { return dt_host_atomic_add(a, v); }
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) {
  return dt_host_atomic_add(a, v);
}
template <typename F, typename U> inline F dt_host_atomic_add_float(F *address, F value) {
  static_assert(sizeof(F) == sizeof(U), "bits of the float");
  U *bits = (U *)address;
  U old = __atomic_load_n(bits, __ATOMIC_RELAXED), next;
  F was;
  do {
    memcpy(&was, &old, sizeof was);
    F sum = was + value;
    memcpy(&next, &sum, sizeof next);
  } while (!__atomic_compare_exchange_n(bits, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return was;
}
inline float atomicAdd(float *a, float v) { return dt_host_atomic_add_float<float, uint32_t>(a, v); }
inline double atomicAdd(double *a, double v) {
  return dt_host_atomic_add_float<double, uint64_t>(a, v);
}
template <typename T> inline T dt_host_atomic_cas(T *address, T compare, T value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}
inline int atomicCAS(int *a, int compare, int v) { return dt_host_atomic_cas(a, compare, v); }
inline unsigned atomicCAS(unsigned *a, unsigned compare, unsigned v) {
  return dt_host_atomic_cas(a, compare, v);
}
inline unsigned long long atomicCAS(unsigned long long *a, unsigned long long compare,
                                    unsigned long long v) {
  return dt_host_atomic_cas(a, compare, v);
}
inline int atomicExch(int *a, int v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }
inline int atomicMax(int *a, int v) {
  int old = __atomic_load_n(a, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
inline int atomicMin(int *a, int v) {
  int old = __atomic_load_n(a, __ATOMIC_RELAXED);
  while (old > v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}

/* ---------------------------------------------------------------- math intrinsics */

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
inline int __float_as_int(float f) { return (int)__float_as_uint(f); }
inline float __int_as_float(int i) { return __uint_as_float((unsigned)i); }
template <typename T> inline T __ldg(const T *p) { return *p; }
