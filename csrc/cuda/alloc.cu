/* Device memory with csrc/core/alloc.c's prototypes: stream-ordered allocation on the current
 * device with a live-byte counter (per device too), and the stream-ordered scratch that kernels
 * take for their temporaries. */
#include <mutex>
#include <unordered_map>

#include "internal.cuh"

/* Live allocations, for allocatedBytes() and for freeing on the device that made them. */
struct block_info {
  int64_t nbytes;
  int device;
};
static std::unordered_map<void *, block_info> blocks;
static std::mutex blocks_mutex;
static int64_t live_bytes, device_bytes[MAX_DEVICES];

/* NULL on failure with the reason in dt_last_error. */
DT_EXPORT void *dt_alloc(int64_t nbytes, int32_t zero) {
  dt_cuda_device *dev = dt_cuda_current();
  if (dev == NULL) return NULL;
  int current = dt_cuda_current_index();
  if (nbytes < 0) {
    dt_fail(DT_EINVAL, "dt_alloc: negative size %lld", (long long)nbytes);
    return NULL;
  }
  void *ptr = NULL;
  cudaError_t err = cudaMallocAsync(&ptr, (size_t)(nbytes > 0 ? nbytes : 1), dev->compute);
  if (err == cudaSuccess && zero) err = cudaMemsetAsync(ptr, 0, (size_t)nbytes, dev->compute);
  if (err != cudaSuccess) {
    cudaGetLastError();
    dt_fail(err == cudaErrorMemoryAllocation ? DT_ENOMEM : DT_EDEVICE,
            "dt_alloc: cuda:%d could not allocate %lld bytes: %s", current, (long long)nbytes,
            cudaGetErrorString(err));
    if (ptr != NULL) cudaFreeAsync(ptr, dev->compute);
    return NULL;
  }
  std::lock_guard<std::mutex> lock(blocks_mutex);
  blocks[ptr] = {nbytes, current};
  live_bytes += nbytes;
  device_bytes[current] += nbytes;
  return ptr;
}

/* Frees on the stream of the device that made the block: the free waits for queued kernels. */
DT_EXPORT void dt_free(void *ptr) {
  if (ptr == NULL) return;
  block_info info;
  {
    std::lock_guard<std::mutex> lock(blocks_mutex);
    auto it = blocks.find(ptr);
    if (it == blocks.end()) return;
    info = it->second;
    live_bytes -= info.nbytes;
    device_bytes[info.device] -= info.nbytes;
    blocks.erase(it);
  }
  /* Calls on a device's stream are made with that device current, then the thread's is restored. */
  int current = dt_cuda_current_index();
  if (info.device != current) cudaSetDevice(info.device);
  cudaFreeAsync(ptr, dt_cuda_compute_stream(info.device));
  if (info.device != current && current >= 0) cudaSetDevice(current);
}

DT_EXPORT int64_t dt_allocated_bytes(void) {
  std::lock_guard<std::mutex> lock(blocks_mutex);
  return live_bytes;
}

/* Bytes live on device `index` (dt_allocated_bytes counts every device). */
DT_EXPORT int64_t dt_cuda_allocated_bytes_on(int32_t index) {
  std::lock_guard<std::mutex> lock(blocks_mutex);
  return index >= 0 && index < MAX_DEVICES ? device_bytes[index] : 0;
}

DT_EXPORT int64_t dt_allocated_blocks(void) {
  std::lock_guard<std::mutex> lock(blocks_mutex);
  return (int64_t)blocks.size();
}

int dt_cuda_scratch(dt_cuda_device *dev, int64_t nbytes, void **out) {
  cudaError_t err = cudaMallocAsync(out, (size_t)(nbytes > 0 ? nbytes : 1), dev->compute);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return dt_fail(DT_ENOMEM, "cuda: no scratch of %lld bytes: %s", (long long)nbytes,
                   cudaGetErrorString(err));
  }
  return DT_OK;
}

void dt_cuda_scratch_free(dt_cuda_device *dev, void *ptr) { cudaFreeAsync(ptr, dev->compute); }

