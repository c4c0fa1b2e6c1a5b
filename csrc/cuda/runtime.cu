/* The CUDA device's runtime: finding devices (with the reason when there are none), one compute
 * stream per device, copies between host and device through pinned staging blocks,
 * synchronisation and the device-side error record. Allocation is alloc.cu's. */
#include <stdio.h>
#include <string.h>

#include <mutex>

#include "internal.cuh"

/* Bytes of each pinned staging block: big enough that a copy costs one transfer per block. */
#define STAGING_BYTES (8 << 20)

static dt_cuda_device devices[MAX_DEVICES];
static std::mutex devices_mutex;
static thread_local int current = -1;

/* Explains a failed cudaGetDeviceCount in the words a user acts on. */
static int no_devices(cudaError_t err) {
  if (err == cudaErrorInsufficientDriver)
    return dt_fail(DT_EUNSUPPORTED,
                   "no usable NVIDIA driver: libcuda.so.1 is missing or older than the CUDA %d.%d "
                   "runtime this library was built with (cudaErrorInsufficientDriver)",
                   CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
  if (err == cudaErrorNoDevice || err == cudaSuccess)
    return dt_fail(DT_EUNSUPPORTED, "no CUDA device: the NVIDIA driver found no GPU%s",
                   err == cudaErrorNoDevice ? " (cudaErrorNoDevice)" : "");
  return dt_fail(DT_EUNSUPPORTED, "CUDA is unusable: cudaGetDeviceCount failed: %s (%s)",
                 cudaGetErrorString(err), cudaGetErrorName(err));
}

/* How many CUDA devices this process sees; DT_EUNSUPPORTED with the reason when none. */
DT_EXPORT int dt_cuda_device_count(int32_t *count) {
  CHECK_PTR(count);
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  *count = err == cudaSuccess ? n : 0;
  if (err != cudaSuccess || n == 0) return no_devices(err);
  return DT_OK;
}

/* "NVIDIA H200 (sm_90, 141 GiB)" into buf. */
DT_EXPORT int dt_cuda_device_name(int32_t index, char *buf, int64_t len) {
  CHECK_PTR(buf);
  CHECK(len > 0, "dt_cuda_device_name: buffer length %lld", (long long)len);
  cudaDeviceProp prop;
  cudaCheck(cudaGetDeviceProperties(&prop, index));
  snprintf(buf, (size_t)len, "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
           (double)prop.totalGlobalMem / (1 << 30));
  return DT_OK;
}

static int init_device(int index) {
  dt_cuda_device *dev = &devices[index];
  cudaCheck(cudaSetDevice(index));
  cudaCheck(cudaStreamCreateWithFlags(&dev->compute, cudaStreamNonBlocking));
  /* Freed blocks stay in the pool for reuse instead of going back to the driver at every sync. */
  cudaMemPool_t pool;
  cudaCheck(cudaDeviceGetDefaultMemPool(&pool, index));
  uint64_t keep = UINT64_MAX;
  cudaCheck(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  for (int s = 0; s < STAGING_SLOTS; s++) {
    cudaCheck(cudaHostAlloc((void **)&dev->staging[s], STAGING_BYTES, cudaHostAllocPortable));
    cudaCheck(cudaEventCreateWithFlags(&dev->staged[s], cudaEventDisableTiming));
  }
  dev->staging_bytes = STAGING_BYTES;
  cudaCheck(cudaMalloc((void **)&dev->error, sizeof(dt_device_error_t)));
  /* On the compute stream, before any kernel that may set the record (see take_device_error). */
  cudaCheck(cudaMemsetAsync(dev->error, 0, sizeof(dt_device_error_t), dev->compute));
  dev->ready = 1;
  return DT_OK;
}

/* Makes `index` the calling thread's device, setting it up on first use. */
DT_EXPORT int dt_cuda_use_device(int32_t index) {
  if (index == current) return DT_OK;
  int32_t count = 0;
  int status = dt_cuda_device_count(&count);
  if (status != DT_OK) return status;
  CHECK(index >= 0 && index < count && index < MAX_DEVICES,
        "cuda: device index %d is out of range (this process sees %d device%s)", index, count,
        count == 1 ? "" : "s");
  {
    std::lock_guard<std::mutex> lock(devices_mutex);
    if (!devices[index].ready && (status = init_device(index)) != DT_OK) return status;
  }
  cudaCheck(cudaSetDevice(index));
  current = index;
  return DT_OK;
}

dt_cuda_device *dt_cuda_current(void) {
  if (current < 0) {
    dt_fail(DT_EINVAL, "cuda: no device selected on this thread (dt_cuda_use_device)");
    return NULL;
  }
  return &devices[current];
}

int dt_cuda_current_index(void) { return current; }

/* The compute stream of device `index` (set up already), for the NCCL shim's ordering. */
cudaStream_t dt_cuda_compute_stream(int index) { return devices[index].compute; }

/* ---------------------------------------------------------------- errors and synchronisation */

/* Reads and clears the device-side error record; DT_EINVAL with its message when one was set.
 * Both run on the compute stream, whose kernels are the ones that set the record. The compute
 * stream is non-blocking, so the legacy default stream (cudaMemcpy, cudaMemset) is unordered with
 * it: a clear there, still pending when this returns, could erase an error that a kernel queued
 * right after records first. */
static int take_device_error(dt_cuda_device *dev) {
  dt_device_error_t e;
  cudaCheck(cudaMemcpyAsync(&e, dev->error, sizeof e, cudaMemcpyDeviceToHost, dev->compute));
  cudaCheck(cudaStreamSynchronize(dev->compute));
  if (e.kind == DT_DEVERR_NONE) return DT_OK;
  cudaCheck(cudaMemsetAsync(dev->error, 0, sizeof e, dev->compute));
  if (e.kind == DT_DEVERR_DIVISION)
    return dt_fail(DT_EINVAL, "integer division by zero (element %lld, found on cuda:%d)",
                   e.position, current);
  const char *what = e.kind == DT_DEVERR_EMBEDDING ? "embedding: index"
                     : e.kind == DT_DEVERR_TARGET  ? "crossEntropy: target"
                                                   : "index";
  return dt_fail(DT_EINVAL, "%s %d at position %lld is out of range [0, %lld) (found on cuda:%d)",
                 what, e.value, e.position, e.limit, current);
}

/* Waits for the current device's queued work; reports any device-side error it found. */
DT_EXPORT int dt_cuda_synchronize(void) {
  CURRENT(dev);
  cudaCheck(cudaStreamSynchronize(dev->compute));
  return take_device_error(dev);
}

/* ---------------------------------------------------------------- copies */

int dt_cuda_stage_in(dt_cuda_device *dev, void *dst, int64_t units, int64_t unit_bytes,
                     dt_fill_fn fill, void *ctx) {
  CHECK(unit_bytes > 0 && unit_bytes <= dev->staging_bytes,
        "cuda: a copy unit of %lld bytes does not fit a staging block of %lld",
        (long long)unit_bytes, (long long)dev->staging_bytes);
  int64_t per_block = dev->staging_bytes / unit_bytes;
  for (int64_t first = 0; first < units; first += per_block) {
    int64_t count = units - first < per_block ? units - first : per_block;
    int slot = dev->next_slot;
    dev->next_slot = (slot + 1) % STAGING_SLOTS;
    /* The block may still be feeding an earlier copy: wait for that one only. */
    cudaCheck(cudaEventSynchronize(dev->staged[slot]));
    fill(ctx, dev->staging[slot], first, count);
    cudaCheck(cudaMemcpyAsync((char *)dst + first * unit_bytes, dev->staging[slot],
                              (size_t)(count * unit_bytes), cudaMemcpyHostToDevice, dev->compute));
    cudaCheck(cudaEventRecord(dev->staged[slot], dev->compute));
  }
  return DT_OK;
}

static void fill_bytes(void *ctx, char *block, int64_t first, int64_t count) {
  memcpy(block, (const char *)ctx + first, (size_t)count);
}

/* Host to device; returns once `src` may be reused (the device copy itself is asynchronous). */
DT_EXPORT int dt_cuda_copy_in(void *dst, const void *src, int64_t nbytes) {
  CHECK_PTR(dst); CHECK_PTR(src); CHECK_COUNT(nbytes);
  CURRENT(dev);
  return dt_cuda_stage_in(dev, dst, nbytes, 1, fill_bytes, (void *)src);
}

/* Device to host, after the work queued before it; reports device-side errors found so far. */
DT_EXPORT int dt_cuda_copy_out(void *dst, const void *src, int64_t nbytes) {
  CHECK_PTR(dst); CHECK_PTR(src); CHECK_COUNT(nbytes);
  CURRENT(dev);
  cudaCheck(cudaMemcpyAsync(dst, src, (size_t)nbytes, cudaMemcpyDeviceToHost, dev->compute));
  cudaCheck(cudaStreamSynchronize(dev->compute));
  return take_device_error(dev);
}

/* Bytes free and in total on the current device. */
DT_EXPORT int dt_cuda_mem_info(int64_t *free_bytes, int64_t *total_bytes) {
  CHECK_PTR(free_bytes); CHECK_PTR(total_bytes);
  CURRENT(dev);
  (void)dev;
  size_t f = 0, t = 0;
  cudaCheck(cudaMemGetInfo(&f, &t));
  *free_bytes = (int64_t)f;
  *total_bytes = (int64_t)t;
  return DT_OK;
}
