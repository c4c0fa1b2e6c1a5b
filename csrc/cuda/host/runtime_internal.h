/* What the host build's files share beyond the CUDA API (cuda_runtime.h): queuing work on a
 * stream, the calling thread's last error, device faults, and the seed that orders block threads. */
#pragma once

#include <functional>
#include <string>

#include "cuda_runtime.h"

namespace dt_host {

/* Queues `work` on `stream` (NULL: the current device's legacy stream), after everything queued
 * there before; an error when the handle is bad or the stream's device has faulted. */
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work);
/* What the next cudaGetLastError returns (the first error since the last read). */
void set_last_error(cudaError_t error);
/* Marks the device of the stream running on this thread failed, as a faulting kernel does: the
 * message goes to stderr, and every later call that touches the device returns
 * cudaErrorLaunchFailure. */
void fault_running_stream(const std::string &message);
/* Whether the device of the stream running on this thread has faulted: kernels and copies queued
 * after a fault do not run (their results would be garbage), synchronisation still does. */
bool running_device_faulted(void);
/* DTRAIN_CUDA_HOST_SEED (decimal or 0x-hex), or a fixed default: the order of block threads and of
 * blocks is a function of it and of the launch's number, so a failure repeats. */
uint64_t order_seed(void);
/* splitmix64: the next number of a stream of them kept in `state`. */
uint64_t next_random(uint64_t &state);

} // namespace dt_host
