/* What a library outside the host build needs of its streams: to queue work on one. The host
 * build (csrc/cuda/host/) runs the CUDA runtime over host memory, each stream an in-order queue
 * served by its own thread. The CPU stand-ins for cuBLAS and NCCL that the tests load
 * (tests/cuda/host/) receive the library's cudaStream_t in their calls, as the real ones do, and
 * queue their work on it through this table, so that a product or a collective is ordered with the
 * kernels around it exactly as on a GPU. Plain C, so both sides read it. */
#pragma once

#include <stdint.h>

/* "dtHstrm1": the first word of every stream's table. */
#define DT_HOST_STREAM_MAGIC 0x316d72747348745aULL

typedef void (*dt_host_work)(void *arg);

typedef struct dt_host_stream_ops {
  uint64_t magic;
  /* Queues fn(arg) on `stream` after everything queued on it before; 0, or -1 when the stream's
   * device has failed (fn is then not called and arg stays the caller's). */
  int (*enqueue)(void *stream, dt_host_work fn, void *arg);
  /* Marks the stream's device failed, as a faulting kernel does: `message` goes to stderr and later
   * runtime calls on that device return cudaErrorLaunchFailure. */
  void (*fail)(void *stream, const char *message);
} dt_host_stream_ops;

/* A host build's cudaStream_t points at a struct that begins with this. */
typedef struct dt_host_stream_head {
  const dt_host_stream_ops *ops;
} dt_host_stream_head;

/* The table of `stream`, or NULL when it is not a host build's stream (NULL, the legacy default
 * stream, included: dtrain never queues library work there). */
static inline const dt_host_stream_ops *dt_host_stream_table(void *stream) {
  if (stream == 0) return 0;
  const dt_host_stream_ops *ops = ((const dt_host_stream_head *)stream)->ops;
  return ops != 0 && ops->magic == DT_HOST_STREAM_MAGIC ? ops : 0;
}
