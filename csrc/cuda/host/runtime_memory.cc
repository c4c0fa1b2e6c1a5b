/* Memory of the host build ([Note: the host build] in cuda_runtime.h). Device memory is host
 * memory that the runtime tracks, so that a copy or memset naming memory no device allocation
 * holds (a host pointer passed as a device one, a freed block, a range past a block's end) fails
 * as cudaErrorInvalidValue instead of working by accident. New device memory is filled with 0xff
 * bytes (NaN as f32, -1 as an integer), as reused GPU memory holds old values, not zeros.
 *
 * [Note: copies as CUDA times them]
 * - From pageable host memory to the device, an asynchronous copy reads the source before it
 *   returns (CUDA stages it), and the device side lands in stream order.
 * - To pageable host memory, it returns only once the copy is done (CUDA's documented behaviour).
 * - Between pinned host memory (cudaHostAlloc) and the device it is fully asynchronous: the host
 *   buffer is read or written when the stream reaches the copy, which waits a random 50-250 us
 *   first (seeded; DTRAIN_CUDA_HOST_COPY_DELAY_US=0 turns it off) as a DMA takes its time, so
 *   that work that fails to wait for it reads the buffer's old contents. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <deque>
#include <map>

#include "runtime_state.h"

namespace dt_host {

namespace {

struct block {
  size_t bytes;
  int device; /* -1: pinned host memory */
};

std::mutex &blocks_mutex() {
  static std::mutex *m = new std::mutex();
  return *m;
}
std::map<uintptr_t, block> &blocks() {
  static auto *m = new std::map<uintptr_t, block>();
  return *m;
}

/* The block holding [p, p + n), or NULL. `device`: -1 for pinned host memory, else any device. */
const block *find(const void *p, size_t n, bool pinned) {
  std::lock_guard<std::mutex> lock(blocks_mutex());
  auto &all = blocks();
  auto it = all.upper_bound((uintptr_t)p);
  if (it == all.begin()) return nullptr;
  --it;
  if ((it->second.device < 0) != pinned) return nullptr;
  if ((uintptr_t)p + n > it->first + it->second.bytes) return nullptr;
  return &it->second;
}

#if defined(__SANITIZE_ADDRESS__)
extern "C" void __asan_poison_memory_region(void const volatile *addr, size_t size);
extern "C" void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define POISON(p, n) __asan_poison_memory_region((p), (n))
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

size_t rounded_size(size_t bytes) { return bytes > 0 ? (bytes + 255) / 256 * 256 : 256; }

void *allocate(size_t bytes, int device) {
  size_t rounded = rounded_size(bytes);
  void *p = aligned_alloc(256, rounded);
  if (p == nullptr) return nullptr;
  if (device >= 0) memset(p, 0xff, rounded);
  /* The rounding's tail is past the block: AddressSanitizer reports a kernel that reads it. */
  POISON((char *)p + bytes, rounded - bytes);
  std::lock_guard<std::mutex> lock(blocks_mutex());
  blocks()[(uintptr_t)p] = {bytes, device};
  if (device >= 0) {
    device_state &d = dt_host::device(device);
    std::lock_guard<std::mutex> l(d.mutex);
    d.allocated += (int64_t)bytes;
  }
  return p;
}

/* Forgets the block that starts at p (false when none does); the caller frees the memory. */
bool forget(void *p, bool pinned, size_t *bytes = nullptr) {
  std::lock_guard<std::mutex> lock(blocks_mutex());
  auto it = blocks().find((uintptr_t)p);
  if (it == blocks().end() || (it->second.device < 0) != pinned) return false;
  if (bytes != nullptr) *bytes = it->second.bytes;
  if (!pinned) {
    device_state &d = dt_host::device(it->second.device);
    std::lock_guard<std::mutex> l(d.mutex);
    d.allocated -= (int64_t)it->second.bytes;
  }
  blocks().erase(it);
  return true;
}

/* [Note: freed device memory]
 * A block freed in stream order is kept, filled with 0xff (and poisoned under AddressSanitizer),
 * until 256 MiB of later frees have passed, before the allocator may hand it out again: work that
 * the free was not ordered after (a copy on another stream, the bug of a missing wait) then
 * writes into memory nobody owns or reads NaN, instead of corrupting the host heap or another
 * tensor without a trace. */
constexpr size_t kQuarantineBytes = (size_t)256 << 20;

void release_in_order(void *ptr, size_t bytes) {
  static std::mutex *mutex = new std::mutex();
  static auto *held = new std::deque<std::pair<void *, size_t>>();
  static size_t held_bytes = 0;
  size_t rounded = rounded_size(bytes);
  UNPOISON(ptr, rounded);
  memset(ptr, 0xff, rounded);
  POISON(ptr, rounded);
  std::lock_guard<std::mutex> lock(*mutex);
  held->push_back({ptr, rounded});
  held_bytes += rounded;
  while (held_bytes > kQuarantineBytes && !held->empty()) {
    auto [old, old_bytes] = held->front();
    held->pop_front();
    held_bytes -= old_bytes;
    UNPOISON(old, old_bytes);
    free(old);
  }
}

std::atomic<uint64_t> copies{0};

/* The DMA delay of [Note: copies as CUDA times them]. */
void dma_delay(uint64_t copy) {
  static const long limit = [] {
    const char *v = getenv("DTRAIN_CUDA_HOST_COPY_DELAY_US");
    return v != nullptr && *v != '\0' ? atol(v) : 250L;
  }();
  if (limit <= 0) return;
  uint64_t state = order_seed() ^ (copy * 0xD1B54A32D192ED03ull);
  long low = limit / 5, us = low + (long)(next_random(state) % (uint64_t)(limit - low + 1));
  struct timespec pause = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&pause, nullptr);
}

enum side { HOST_PAGEABLE, HOST_PINNED, DEVICE_MEMORY };

side side_of(const void *p, size_t n, bool device_expected, bool &ok) {
  if (device_expected) {
    ok = n == 0 || find(p, n, false) != nullptr;
    return DEVICE_MEMORY;
  }
  ok = true;
  return find(p, n, true) != nullptr ? HOST_PINNED : HOST_PAGEABLE;
}

/* `height` rows of `width` bytes, `dst_pitch` and `src_pitch` bytes apart (a plain copy is one
 * row); n is the span each side covers. */
cudaError_t copy(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                 size_t height, cudaMemcpyKind kind, cudaStream_t stream, bool synchronous) {
  if (height > 1 && (dst_pitch < width || src_pitch < width)) return cudaErrorInvalidValue;
  size_t n = width == 0 || height == 0 ? 0 : (height - 1) * src_pitch + width;
  size_t dst_n = width == 0 || height == 0 ? 0 : (height - 1) * dst_pitch + width;
  if ((dst == nullptr || src == nullptr) && n > 0) return cudaErrorInvalidValue;
  if (kind == cudaMemcpyDefault) {
    kind = (cudaMemcpyKind)((find(src, n, false) ? 2 : 0) | (find(dst, dst_n, false) ? 1 : 0));
    static const cudaMemcpyKind by_sides[] = {cudaMemcpyHostToHost, cudaMemcpyHostToDevice,
                                              cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
    kind = by_sides[kind];
  }
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice)
    return cudaErrorInvalidMemcpyDirection;
  bool src_ok, dst_ok;
  side from = side_of(src, n, kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice,
                      src_ok);
  side to = side_of(dst, dst_n, kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice,
                    dst_ok);
  if (!src_ok || !dst_ok) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  dt_host_stream *s = resolve(stream);
  cudaError_t failed = device_error(s->device);
  if (failed != cudaSuccess) return failed;
  const void *source = src;
  char *staged = nullptr;
  if (from == HOST_PAGEABLE && !synchronous) {
    staged = (char *)malloc(width * height);
    if (staged == nullptr) return cudaErrorMemoryAllocation;
    for (size_t r = 0; r < height; r++)
      memcpy(staged + r * width, (const char *)src + r * src_pitch, width);
    source = staged;
    src_pitch = width;
  }
  bool delayed = !s->legacy && (from == HOST_PINNED || to == HOST_PINNED);
  uint64_t number = copies.fetch_add(1);
  cudaError_t queued =
      enqueue(s, [dst, dst_pitch, source, src_pitch, width, height, staged, delayed, number] {
        if (delayed) dma_delay(number);
        if (!running_device_faulted()) {
          for (size_t r = 0; r < height; r++)
            memmove((char *)dst + r * dst_pitch, (const char *)source + r * src_pitch, width);
        }
        free(staged);
      });
  if (queued != cudaSuccess) {
    free(staged);
    return queued;
  }
  if (synchronous || to == HOST_PAGEABLE) drain(s);
  return device_error(s->device);
}

cudaError_t fill(void *p, int value, size_t n, cudaStream_t stream, bool synchronous) {
  if (p == nullptr || find(p, n, false) == nullptr) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  dt_host_stream *s = resolve(stream);
  cudaError_t queued = enqueue(s, [p, value, n] {
    if (!running_device_faulted()) memset(p, value, n);
  });
  if (queued != cudaSuccess) return queued;
  if (synchronous) drain(s);
  return device_error(s->device);
}

} // namespace

} // namespace dt_host

using namespace dt_host;

cudaError_t cudaMalloc(void **ptr, size_t size) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  cudaError_t failed = device_error(current_device());
  if (failed != cudaSuccess) return failed;
  device_state &d = device(current_device());
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.allocated + (int64_t)size > device_memory_bytes()) return cudaErrorMemoryAllocation;
  }
  *ptr = allocate(size, current_device());
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* As CUDA's cudaFree: waits for the device's work first. */
cudaError_t cudaFree(void *ptr) {
  if (ptr == nullptr) return cudaSuccess;
  drain_device(current_device());
  size_t bytes = 0;
  if (!forget(ptr, false, &bytes)) return cudaErrorInvalidValue;
  release_in_order(ptr, bytes);
  return cudaSuccess;
}

/* Memory is made at the call (stream order cannot make it usable any earlier). */
cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
  if (resolve(stream)->device != current_device()) return cudaErrorInvalidValue;
  return cudaMalloc(ptr, size);
}

/* The block is forgotten at once (later calls naming it fail) and freed in stream order, after the
 * work queued before it that may still read it. */
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (ptr == nullptr) return cudaSuccess;
  size_t bytes = 0;
  if (!forget(ptr, false, &bytes)) return cudaErrorInvalidValue;
  return enqueue(stream, [ptr, bytes] { release_in_order(ptr, bytes); });
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned flags) {
  if (ptr == nullptr || (flags & ~1u) != 0) return cudaErrorInvalidValue;
  *ptr = allocate(size, -1);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

/* As CUDA's: waits for every device's work, since a copy may still be reading the block. */
cudaError_t cudaFreeHost(void *ptr) {
  if (ptr == nullptr) return cudaSuccess;
  for (int d = 0; d < device_count(); d++) drain_device(d);
  size_t bytes = 0;
  if (!forget(ptr, true, &bytes)) return cudaErrorInvalidValue;
  UNPOISON(ptr, rounded_size(bytes));
  free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind) {
  return copy(dst, count, src, count, count, 1, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return copy(dst, count, src, count, count, 1, kind, stream, false);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return copy(dst, dst_pitch, src, src_pitch, width, height, kind, stream, false);
}

cudaError_t cudaMemset(void *ptr, int value, size_t count) {
  return fill(ptr, value, count, nullptr, true);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream) {
  return fill(ptr, value, count, stream, false);
}
