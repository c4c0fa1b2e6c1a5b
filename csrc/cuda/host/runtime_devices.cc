/* Devices and errors of the host build ([Note: the host build] in cuda_runtime.h): how many
 * devices there are and what they say they are, the calling thread's current device and last
 * error, and the fault that makes a device's later calls fail, as a sticky CUDA error does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_state.h"

namespace dt_host {

namespace {

thread_local int current = 0;
thread_local cudaError_t last_error = cudaSuccess;

int64_t env_int(const char *name, int64_t fallback) {
  const char *v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char *end = nullptr;
  long long n = strtoll(v, &end, 0);
  if (*end != '\0') {
    fprintf(stderr, "dtrain host CUDA: %s=%s is not a number; using %lld\n", name, v,
            (long long)fallback);
    return fallback;
  }
  return n;
}

} // namespace

/* DTRAIN_CUDA_HOST_DEVICES devices (1 to 64, 2 when unset), narrowed by CUDA_VISIBLE_DEVICES as
 * CUDA narrows a machine's: the listed indices, up to the first that does not exist; none when it
 * is set and empty. */
int device_count(void) {
  static const int count = [] {
    int64_t n = env_int("DTRAIN_CUDA_HOST_DEVICES", 2);
    int machine = (int)(n < 1 ? 1 : n > 64 ? 64 : n);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (visible == nullptr) return machine;
    int listed = 0;
    for (const char *p = visible; *p != '\0';) {
      char *end = nullptr;
      long index = strtol(p, &end, 10);
      if (end == p || index < 0 || index >= machine) break;
      listed++;
      p = *end == ',' ? end + 1 : end;
      if (*end != ',' && *end != '\0') break;
    }
    return listed;
  }();
  return count;
}

device_state &device(int index) {
  static device_state *const devices = new device_state[64];
  return devices[index];
}

int current_device(void) { return current; }

cudaError_t device_error(int index) {
  return device(index).faulted.load() ? cudaErrorLaunchFailure : cudaSuccess;
}

int64_t device_memory_bytes(void) {
  static const int64_t bytes = env_int("DTRAIN_CUDA_HOST_MEMORY", (int64_t)16 << 30);
  return bytes;
}

void set_last_error(cudaError_t error) {
  if (last_error == cudaSuccess) last_error = error;
}

uint64_t order_seed(void) {
  static const uint64_t seed = (uint64_t)env_int("DTRAIN_CUDA_HOST_SEED", 0x5eed);
  return seed;
}

uint64_t next_random(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace dt_host

using namespace dt_host;

struct error_name {
  cudaError_t error;
  const char *name, *text;
};
static const error_name error_names[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
};

static const error_name *find_error(cudaError_t error) {
  for (const error_name &e : error_names)
    if (e.error == error) return &e;
  return nullptr;
}

const char *cudaGetErrorString(cudaError_t error) {
  const error_name *e = find_error(error);
  return e ? e->text : "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t error) {
  const error_name *e = find_error(error);
  return e ? e->name : "cudaErrorUnknown";
}

/* The sticky fault of the current device, else the first error since the last read (cleared). */
cudaError_t cudaGetLastError(void) {
  cudaError_t sticky = device_error(current);
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return sticky != cudaSuccess ? sticky : e;
}

cudaError_t cudaPeekAtLastError(void) {
  cudaError_t sticky = device_error(current);
  return sticky != cudaSuccess ? sticky : last_error;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (count == nullptr) return cudaErrorInvalidValue;
  *count = device_count();
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int index) {
  if (prop == nullptr) return cudaErrorInvalidValue;
  if (index < 0 || index >= device_count()) return cudaErrorInvalidDevice;
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "dtrain host CUDA device (the CPU, no GPU)");
  prop->totalGlobalMem = (size_t)device_memory_bytes();
  prop->sharedMemPerBlock = 48 << 10;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int index) {
  if (index < 0 || index >= device_count()) return cudaErrorInvalidDevice;
  current = index;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *index) {
  if (index == nullptr) return cudaErrorInvalidValue;
  *index = current;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  drain_device(current);
  return device_error(current);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return cudaErrorInvalidValue;
  device_state &d = device(current);
  std::lock_guard<std::mutex> lock(d.mutex);
  int64_t total = device_memory_bytes(), left = total - d.allocated;
  *free_bytes = (size_t)(left > 0 ? left : 0);
  *total_bytes = (size_t)total;
  return device_error(current);
}

/* The pool is host malloc's: keeping freed blocks is its business, so its attributes are noted
 * and ignored. */
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int index) {
  if (pool == nullptr) return cudaErrorInvalidValue;
  if (index < 0 || index >= device_count()) return cudaErrorInvalidDevice;
  *pool = (cudaMemPool_t)&device(index);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void *value) {
  if (pool == nullptr || value == nullptr || attr != cudaMemPoolAttrReleaseThreshold)
    return cudaErrorInvalidValue;
  return cudaSuccess;
}
