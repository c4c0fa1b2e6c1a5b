/* What every file of libdtrain_cuda shares: libdtrain's interface (csrc/core/dtrain.h: the
 * prototypes every kernel here is checked against, status codes, CHECK macros) and per-element
 * math (csrc/core/scalar_math.h), the per-device state, the checker macros that carry file and
 * line, and the launch helpers. Each kernel family lives in the file named as csrc/core's and runs
 * on the current device's compute stream (dt_cuda_use_device picks the device for the calling
 * thread). */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "../core/dtrain.h"
#include "../core/scalar_math.h"
#include "dtrain_cuda.h"

/* The C ABI (ffi/cuda.ts). The host build hides everything else, so that its exports are exactly
 * these, as a test holds against libdtrain_cuda.so's. */
#ifdef DT_CUDA_HOST
#define DT_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define DT_EXPORT extern "C"
#endif

/* Returns DT_EDEVICE with "file:line: call: cuda error" as the message when a runtime call fails. */
#define cudaCheck(call)                                                                            \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess)                                                                       \
      return dt_fail(DT_EDEVICE, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call,                 \
                     cudaGetErrorString(err_), cudaGetErrorName(err_));                            \
  } while (0)

/* After a launch: a bad configuration shows at once, not at the next synchronisation. */
#define LAUNCH_CHECK() cudaCheck(cudaGetLastError())

/* Row kernels run one block per row: at most this many rows a launch. */
#define ROWS_MAX 0x7fffffffLL

#define MAX_DEVICES 64
#define THREADS 256
#define STAGING_SLOTS 2

/* Everything a device keeps for the process: made on its first use, never freed (as the CUDA
 * context itself lives until exit). */
typedef struct {
  int ready;
  cudaStream_t compute;
  void *blas;                      /* cublasHandle_t, made on the first matrix product */
  char *staging[STAGING_SLOTS];    /* pinned host blocks that host-to-device copies go through */
  cudaEvent_t staged[STAGING_SLOTS]; /* the last copy out of each block */
  int next_slot;
  int64_t staging_bytes;
  struct dt_device_error_s *error; /* device memory: see [Note: device-side errors] */
} dt_cuda_device;

/* The calling thread's current device (dt_cuda_use_device), or NULL with a message set. */
dt_cuda_device *dt_cuda_current(void);
/* The index of the calling thread's current device. */
int dt_cuda_current_index(void);
/* Makes `index` the calling thread's device, setting it up on first use (runtime.cu). */
extern "C" int dt_cuda_use_device(int32_t index);
/* The compute stream of device `index`, once set up. */
cudaStream_t dt_cuda_compute_stream(int index);

/* Stream-ordered scratch for a kernel's temporaries (freed with dt_cuda_scratch_free on the same
 * stream, so no synchronisation is needed). */
int dt_cuda_scratch(dt_cuda_device *dev, int64_t nbytes, void **out);
void dt_cuda_scratch_free(dt_cuda_device *dev, void *ptr);

/* Copies `units` units of `unit_bytes` host bytes to the device at `dst` through the pinned
 * staging blocks: fill(ctx, block, first, count) writes units [first, first + count) into the
 * pinned block; the device copy of each block runs asynchronously on the compute stream. */
typedef void (*dt_fill_fn)(void *ctx, char *block, int64_t first, int64_t count);
int dt_cuda_stage_in(dt_cuda_device *dev, void *dst, int64_t units, int64_t unit_bytes,
                     dt_fill_fn fill, void *ctx);

/* The cuBLAS handle of `dev` on its compute stream (loaded with dlopen on first use). */
int dt_cuda_blas(dt_cuda_device *dev, void **handle);

/* [Note: device-side errors]
 * A kernel that finds a bad value in device memory (an embedding index or a class target out of
 * range, an integer division by zero) cannot return a status: the host has moved on. It records the first such error in a
 * device variable and the next synchronisation (dt_cuda_synchronize, a copy to the host) reports
 * it, as PyTorch's device-side asserts do. The kernel leaves the offending output at 0. */
enum {
  DT_DEVERR_NONE = 0,
  DT_DEVERR_EMBEDDING = 1,
  DT_DEVERR_TARGET = 2,
  DT_DEVERR_INDEX = 3,
  DT_DEVERR_DIVISION = 4
};
typedef struct dt_device_error_s {
  int kind;
  int value;
  long long position, limit;
} dt_device_error_t;

/* Records the first device-side error of the device whose record `err` is (dt_cuda_device.error). */
__device__ __forceinline__ void dt_report_device_error(dt_device_error_t *err, int kind, int value,
                                                       long long position, long long limit) {
  if (atomicCAS(&err->kind, DT_DEVERR_NONE, kind) != DT_DEVERR_NONE) return;
  err->value = value;
  err->position = position;
  err->limit = limit;
}

/* Blocks for n elements. */
static inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 * 32 ? (b > 0 ? b : 1) : 65535 * 32);
}

/* A grid-stride loop: kernels are correct for any grid size. */
#define GRID_LOOP(i, n)                                                                            \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)blockDim.x * gridDim.x)

/* The sum (or max) of v over the block; every thread gets the result. `shared` holds 32 values.
 * The sums serve f32 values and i64 counts alike ([Note: two-pass reductions]). */
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <typename T> __device__ __forceinline__ T block_sum(T v, T *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : T(0);
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(v);
}

/* [Note: two-pass reductions]
 * A reduction of a whole tensor to one value (sum() and mean(), the MSE and cross-entropy totals,
 * the count that max()'s backward shares by) runs on many blocks, not on one SM: pass one, a
 * grid-stride loop over partial_blocks(n) blocks, leaves one partial per block in scratch; pass
 * two, one block, adds the partials with sum_partials. No atomics: the grid depends only on n, so
 * every partial and their order are fixed and the result is the same bit for bit run to run.
 * Counts are i64 partials, exact at any size. */
#define PARTIALS_MAX 1024

/* The blocks of pass one for n elements: about one full wave of an H100/H200 at most. */
static inline unsigned partial_blocks(int64_t n) {
  unsigned b = blocks_for(n);
  return b < PARTIALS_MAX ? b : PARTIALS_MAX;
}

/* The sum of p[0, n) over the block, in an order fixed by n and blockDim; every thread gets it. */
template <typename T> __device__ __forceinline__ T sum_partials(const T *p, int64_t n, T *shared) {
  T acc = T(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += p[i];
  return block_sum(acc, shared);
}

/* batch products c_i = alpha * op(a_i) @ op(b_i) + beta * c_i (row-major, `s*` elements apart) on
 * the device's stream, in the process's matmul precision (matmul.cu, [Note: matmul precision]). */
int dt_cuda_gemm(dt_cuda_device *dev, int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, int64_t sa, const float *b, int64_t ldb,
                 int64_t sb, float beta, float *c, int64_t ldc, int64_t sc, int64_t batch);

/* The current device as `dev`, or DT_EINVAL from the enclosing function. */
#define CURRENT(dev)                                                                               \
  dt_cuda_device *dev = dt_cuda_current();                                                         \
  if (dev == NULL) return DT_EINVAL

/* A kernel launch, written once for both compilers: GRID_LAUNCH(kernel, grid, block, shared,
 * stream)(arguments...) is kernel<<<grid, block, shared, stream>>>(arguments...) under nvcc, and
 * the host build's launcher (host/launch.h) under the host compiler ([Note: the host build] in
 * host/cuda_runtime.h). */
#ifdef DT_CUDA_HOST
#define GRID_LAUNCH(kernel, grid, block, shared, stream)                                           \
  dt_host::make_launcher(kernel, #kernel, grid, block, shared, stream)
#else
#define GRID_LAUNCH(kernel, grid, block, shared, stream) kernel<<<grid, block, shared, stream>>>
#endif

/* Launches kernel on blocks_for(n) blocks of THREADS on the device's stream; checks the launch. */
#define LAUNCH(dev, n, kernel, ...)                                                                \
  do {                                                                                             \
    GRID_LAUNCH(kernel, blocks_for(n), THREADS, 0, (dev)->compute)(__VA_ARGS__);                  \
    LAUNCH_CHECK();                                                                                \
  } while (0)
