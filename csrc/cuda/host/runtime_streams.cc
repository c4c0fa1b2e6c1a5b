/* Streams and events of the host build ([Note: the host build] in cuda_runtime.h). A stream is a
 * queue and the thread that serves it, in order. The legacy default stream (NULL) of a device and
 * its blocking streams wait for each other's earlier work, as CUDA's do; non-blocking streams
 * (every stream dtrain makes) wait for nothing they were not told to. An event counts its
 * records: a wait or a query is for the last record made before it, as in CUDA. */
#include <stdio.h>

#include "runtime_state.h"

namespace dt_host {

namespace {

thread_local dt_host_stream *running_stream;

void serve(dt_host_stream *s) {
  running_stream = s;
  std::unique_lock<std::mutex> lock(s->mutex);
  for (;;) {
    s->changed.wait(lock, [s] { return !s->queue.empty() || s->destroyed; });
    if (s->queue.empty()) break;
    std::function<void()> work = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    work();
    work = nullptr;
    lock.lock();
    s->completed++;
    s->changed.notify_all();
  }
  /* Destroyed and drained: the thread leaves; the record stays (a handle may still be read). */
}

/* Makes `waiter` wait, at this point of its queue, for what `source` has queued so far. */
void order_after(dt_host_stream *waiter, dt_host_stream *source) {
  uint64_t until;
  {
    std::lock_guard<std::mutex> lock(source->mutex);
    until = source->queued;
    if (source->completed >= until) return;
  }
  std::lock_guard<std::mutex> lock(waiter->mutex);
  waiter->queue.push_back([source, until] {
    std::unique_lock<std::mutex> l(source->mutex);
    source->changed.wait(l, [&] { return source->completed >= until; });
  });
  waiter->queued++;
  waiter->changed.notify_all();
}

int abi_enqueue(void *stream, dt_host_work fn, void *arg) {
  return enqueue((cudaStream_t)stream, [fn, arg] { fn(arg); }) == cudaSuccess ? 0 : -1;
}

void abi_fail(void *stream, const char *message) {
  dt_host_stream *s = (dt_host_stream *)stream;
  fprintf(stderr, "dtrain host CUDA: cuda:%d failed: %s\n", s->device, message);
  device(s->device).faulted.store(true);
}

const dt_host_stream_ops abi_ops = {DT_HOST_STREAM_MAGIC, abi_enqueue, abi_fail};

} // namespace

dt_host_stream *new_stream(int index, bool blocking, bool legacy) {
  dt_host_stream *s = new dt_host_stream();
  s->head.ops = &abi_ops;
  s->device = index;
  s->blocking = blocking;
  s->legacy = legacy;
  std::thread(serve, s).detach();
  device_state &d = device(index);
  std::lock_guard<std::mutex> lock(d.mutex);
  d.streams.push_back(s);
  if (legacy) d.legacy = s;
  return s;
}

dt_host_stream *resolve(cudaStream_t stream) {
  if (stream != nullptr) return stream;
  device_state &d = device(current_device());
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.legacy != nullptr) return d.legacy;
  }
  static std::mutex making;
  std::lock_guard<std::mutex> lock(making);
  if (d.legacy == nullptr) new_stream(current_device(), true, true);
  return d.legacy;
}

cudaError_t enqueue(cudaStream_t stream, std::function<void()> work) {
  dt_host_stream *s = resolve(stream);
  if (s->head.ops != &abi_ops || s->destroyed) return cudaErrorInvalidResourceHandle;
  cudaError_t failed = device_error(s->device);
  if (failed != cudaSuccess) return failed;
  if (s->blocking) {
    std::vector<dt_host_stream *> others;
    {
      device_state &d = device(s->device);
      std::lock_guard<std::mutex> lock(d.mutex);
      for (dt_host_stream *o : d.streams)
        if (o != s && o->blocking && (s->legacy || o->legacy)) others.push_back(o);
    }
    for (dt_host_stream *o : others) order_after(s, o);
  }
  std::lock_guard<std::mutex> lock(s->mutex);
  s->queue.push_back(std::move(work));
  s->queued++;
  s->changed.notify_all();
  return cudaSuccess;
}

void drain(dt_host_stream *s) {
  std::unique_lock<std::mutex> lock(s->mutex);
  uint64_t until = s->queued;
  s->changed.wait(lock, [&] { return s->completed >= until; });
}

void drain_device(int index) {
  std::vector<dt_host_stream *> streams;
  {
    device_state &d = device(index);
    std::lock_guard<std::mutex> lock(d.mutex);
    streams = d.streams;
  }
  for (dt_host_stream *s : streams) drain(s);
}

bool running_device_faulted(void) {
  return running_stream != nullptr && device(running_stream->device).faulted.load();
}

void fault_running_stream(const std::string &message) {
  int index = running_stream != nullptr ? running_stream->device : current_device();
  fprintf(stderr, "dtrain host CUDA: cuda:%d faulted: %s\n", index, message.c_str());
  device(index).faulted.store(true);
}

} // namespace dt_host

using namespace dt_host;

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  if (stream == nullptr || (flags & ~1u) != 0) return cudaErrorInvalidValue;
  cudaError_t failed = device_error(current_device());
  if (failed != cudaSuccess) return failed;
  *stream = new_stream(current_device(), (flags & cudaStreamNonBlocking) == 0, false);
  return cudaSuccess;
}

/* As CUDA's: returns at once; the stream's queued work still runs, then its thread leaves. */
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || stream->legacy) return cudaErrorInvalidResourceHandle;
  {
    device_state &d = device(stream->device);
    std::lock_guard<std::mutex> lock(d.mutex);
    for (size_t i = 0; i < d.streams.size(); i++)
      if (d.streams[i] == stream) d.streams.erase(d.streams.begin() + (long)i);
  }
  std::lock_guard<std::mutex> lock(stream->mutex);
  stream->destroyed = true;
  stream->changed.notify_all();
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  dt_host_stream *s = resolve(stream);
  drain(s);
  return device_error(s->device);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  dt_host_stream *s = resolve(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->completed >= s->queued ? device_error(s->device) : cudaErrorNotReady;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *user_data) {
  if (fn == nullptr) return cudaErrorInvalidValue;
  return enqueue(stream, [fn, user_data] { fn(user_data); });
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  if (event == nullptr || (flags & ~3u) != 0) return cudaErrorInvalidValue;
  *event = new dt_host_event{std::make_shared<dt_host_event_state>()};
  return cudaSuccess;
}

/* The state lives on while queued records and waits hold it, as CUDA releases an event's
 * resources once its work is done. */
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<dt_host_event_state> state = event->state;
  uint64_t record;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    record = ++state->recorded;
  }
  return enqueue(stream, [state, record] {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->completed < record) state->completed = record;
    state->changed.notify_all();
  });
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::lock_guard<std::mutex> lock(event->state->mutex);
  return event->state->completed >= event->state->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  dt_host_event_state &state = *event->state;
  std::unique_lock<std::mutex> lock(state.mutex);
  uint64_t until = state.recorded;
  state.changed.wait(lock, [&] { return state.completed >= until; });
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  if (flags != 0) return cudaErrorInvalidValue;
  std::shared_ptr<dt_host_event_state> state = event->state;
  uint64_t until;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    until = state->recorded;
  }
  if (until == 0) return device_error(resolve(stream)->device);
  return enqueue(stream, [state, until] {
    std::unique_lock<std::mutex> lock(state->mutex);
    state->changed.wait(lock, [&] { return state->completed >= until; });
  });
}
