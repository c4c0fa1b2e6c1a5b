/* The host build's devices and streams as its runtime files see them (runtime_devices.cc,
 * runtime_streams.cc, runtime_memory.cc). Everything here is made with `new` and never freed:
 * stream threads may still run while the process exits, so nothing they touch is destroyed by
 * static destructors. */
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime_internal.h"
#include "stream_abi.h"

struct dt_host_stream {
  dt_host_stream_head head; /* first: what the cuBLAS and NCCL stand-ins read (stream_abi.h) */
  int device;
  bool blocking;            /* synchronises with the legacy stream, as CUDA's blocking streams */
  bool legacy;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  uint64_t queued = 0, completed = 0;
  bool destroyed = false;
};

struct dt_host_event {
  std::shared_ptr<struct dt_host_event_state> state;
};

struct dt_host_event_state {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0, completed = 0;
};

namespace dt_host {

struct device_state {
  std::mutex mutex;
  std::vector<dt_host_stream *> streams; /* live, the legacy one included */
  dt_host_stream *legacy = nullptr;
  std::atomic<bool> faulted{false};
  int64_t allocated = 0;
};

/* Devices this process sees (runtime_devices.cc: DTRAIN_CUDA_HOST_DEVICES, CUDA_VISIBLE_DEVICES). */
int device_count(void);
/* Device `index`'s state (index already checked). */
device_state &device(int index);
/* The calling thread's current device (cudaSetDevice), 0 at first. */
int current_device(void);
/* A new stream on `device`, its thread started. */
dt_host_stream *new_stream(int device, bool blocking, bool legacy);
/* `stream`, or the current device's legacy stream for NULL. */
dt_host_stream *resolve(cudaStream_t stream);
/* Waits until the work queued on `stream` before now has run. */
void drain(dt_host_stream *stream);
/* Waits for every stream of `device`. */
void drain_device(int device);
/* The error a call on `device` returns once the device has faulted (cudaSuccess before). */
cudaError_t device_error(int device);
/* Bytes each device pretends to hold: DTRAIN_CUDA_HOST_MEMORY, 16 GiB when unset. */
int64_t device_memory_bytes(void);

} // namespace dt_host
