/* Batches to the GPU through page-locked host memory: the DataLoader's pinMemory path.
 *
 * [Note: pinned batch ring]
 * Each device has a ring of two pinned (cudaHostAlloc) buffers and its own copy stream, made on
 * first use and kept for the process, like the device's compute stream. A batch's fields, collated
 * in host memory, are staged into the next buffer of the ring and copied to their device blocks
 * with cudaMemcpyAsync on the copy stream; the call returns once the staging is done, so the host
 * gathers the next batch (into the other buffer) while this one crosses the bus. Ordering:
 * - the destinations come from the stream-ordered allocator on the compute stream, so the copy
 *   stream first waits for an event recorded on the compute stream after they were allocated;
 * - an event recorded on the copy stream after the batch's copies is waited for by the compute
 *   stream, so the kernels that read the batch (queued after this call) see all of it, and the
 *   blocks' later frees (also on the compute stream) come after the copy;
 * - a buffer is written again only after its event says its last copy completed
 *   (cudaEventSynchronize: with two buffers, that is the copy of the batch before last).
 * A buffer grows when a batch outgrows it: a larger one replaces it, and the outgrown one is kept
 * (counted in dt_cuda_pinned_bytes), not freed: the wait its reuse needs is its own event's, but
 * cudaFreeHost waits for the whole device, so also for an NCCL collective in flight on another
 * stream, which may be blocked on a peer. Growth by half again keeps what is kept under twice the
 * buffers in use. */
#include <string.h>

#include <mutex>

#include "internal.cuh"

#define RING_SLOTS 2
/* Each field starts on this boundary in the staging buffer (DMA likes aligned sources). */
#define FIELD_ALIGN 256

typedef struct {
  char *host;
  int64_t capacity;
  cudaEvent_t copied; /* the last copy out of this buffer */
} ring_slot;

typedef struct {
  int ready;
  cudaStream_t copy;
  cudaEvent_t allocated; /* recorded on the compute stream: the destinations exist */
  ring_slot slots[RING_SLOTS];
  int next;
  int64_t outgrown_bytes; /* of the buffers replaced by larger ones, kept (see the note) */
} batch_ring;

static batch_ring rings[MAX_DEVICES];
static std::mutex rings_mutex[MAX_DEVICES];

static int64_t aligned(int64_t n) { return (n + FIELD_ALIGN - 1) / FIELD_ALIGN * FIELD_ALIGN; }

static int init_ring(batch_ring *ring) {
  cudaCheck(cudaStreamCreateWithFlags(&ring->copy, cudaStreamNonBlocking));
  cudaCheck(cudaEventCreateWithFlags(&ring->allocated, cudaEventDisableTiming));
  for (int s = 0; s < RING_SLOTS; s++) {
    ring->slots[s] = {NULL, 0, NULL};
    cudaCheck(cudaEventCreateWithFlags(&ring->slots[s].copied, cudaEventDisableTiming));
  }
  ring->ready = 1;
  return DT_OK;
}

/* Makes `slot` of `ring` hold at least `nbytes`; its last copy must have completed. */
static int reserve(batch_ring *ring, ring_slot *slot, int64_t nbytes) {
  if (nbytes <= slot->capacity) return DT_OK;
  /* Grown by half again, so a dataset whose batches vary a little settles after a few. */
  int64_t want = nbytes + nbytes / 2;
  char *host = NULL;
  cudaError_t err = cudaHostAlloc((void **)&host, (size_t)want, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return dt_fail(DT_ENOMEM, "pinMemory: could not allocate %lld bytes of page-locked host "
                   "memory: %s", (long long)want, cudaGetErrorString(err));
  }
  ring->outgrown_bytes += slot->capacity;
  slot->host = host;
  slot->capacity = want;
  return DT_OK;
}

/* Copies `n` host blocks srcs[i] (nbytes[i] each) to device blocks dsts[i] of the current device
 * through the device's pinned ring ([Note: pinned batch ring]). Returns once the host blocks may be
 * reused; the copies finish asynchronously, before any later work on the compute stream runs. */
DT_EXPORT int dt_cuda_copy_in_pinned(int32_t n, void *const *dsts, const void *const *srcs,
                                     const int64_t *nbytes) {
  CHECK(n >= 0, "dt_cuda_copy_in_pinned: negative field count %d", n);
  if (n == 0) return DT_OK;
  CHECK_PTR(dsts); CHECK_PTR(srcs); CHECK_PTR(nbytes);
  int64_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    CHECK(nbytes[i] >= 0, "dt_cuda_copy_in_pinned: field %d has %lld bytes", i,
          (long long)nbytes[i]);
    CHECK(nbytes[i] == 0 || (dsts[i] != NULL && srcs[i] != NULL),
          "dt_cuda_copy_in_pinned: field %d has a NULL address", i);
    total += aligned(nbytes[i]);
  }
  CURRENT(dev);
  int index = dt_cuda_current_index();
  std::lock_guard<std::mutex> lock(rings_mutex[index]);
  batch_ring *ring = &rings[index];
  int st;
  if (!ring->ready && (st = init_ring(ring)) != DT_OK) return st;
  ring_slot *slot = &ring->slots[ring->next];
  ring->next = (ring->next + 1) % RING_SLOTS;
  cudaCheck(cudaEventSynchronize(slot->copied));
  if ((st = reserve(ring, slot, total)) != DT_OK) return st;

  int64_t offset = 0;
  for (int32_t i = 0; i < n; i++) {
    if (nbytes[i] > 0) memcpy(slot->host + offset, srcs[i], (size_t)nbytes[i]);
    offset += aligned(nbytes[i]);
  }
  cudaCheck(cudaEventRecord(ring->allocated, dev->compute));
  cudaCheck(cudaStreamWaitEvent(ring->copy, ring->allocated, 0));
  offset = 0;
  for (int32_t i = 0; i < n; i++) {
    if (nbytes[i] > 0)
      cudaCheck(cudaMemcpyAsync(dsts[i], slot->host + offset, (size_t)nbytes[i],
                                cudaMemcpyHostToDevice, ring->copy));
    offset += aligned(nbytes[i]);
  }
  cudaCheck(cudaEventRecord(slot->copied, ring->copy));
  cudaCheck(cudaStreamWaitEvent(dev->compute, slot->copied, 0));
  return DT_OK;
}

/* Page-locked bytes the ring of device `index` holds (0 before its first batch). */
DT_EXPORT int64_t dt_cuda_pinned_bytes(int32_t index) {
  if (index < 0 || index >= MAX_DEVICES) return 0;
  std::lock_guard<std::mutex> lock(rings_mutex[index]);
  int64_t total = rings[index].outgrown_bytes;
  for (int s = 0; s < RING_SLOTS; s++) total += rings[index].slots[s].capacity;
  return total;
}
