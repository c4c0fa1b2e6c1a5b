/* The NCCL shim's context and the helpers its files share (nccl.cu: collectives; nccl_p2p.cu:
 * point-to-point messages): failing with a status and message, and waiting for the work enqueued
 * on the communication stream, within the timeout, aborting the communicator when it fails. */
#pragma once

#include <string.h>
#include <time.h>

#include <string>
#include <vector>

#include "../gloo/collective_codes.h"
#include "internal.cuh"
#include "libs.h"

/* The collective codes, fingerprint and mismatch message shared with the Gloo shim. DT_OK and
 * DT_EINVAL stay libdtrain's (dtrain.h, the same values), which the C ABI below also returns. */
namespace coll = dtrain::collective;
using coll::DT_EBROKEN;
using coll::DT_EINTERNAL;
using coll::DT_EMISMATCH;
using coll::DT_EPEER;
using coll::DT_ETIMEOUT;
using coll::dt_fingerprint;

struct dt_nccl_ctx {
  const dt_nccl_api *api;
  ncclComm_t comm;
  int device, rank, size;
  int64_t timeout_ms;
  uint64_t seq;
  bool broken;
  std::vector<int> global_ranks;
  cudaStream_t stream;
  cudaEvent_t ready, done;
  dt_fingerprint *fp_host, *fp_dev; /* pinned (fp_entries >= size), and device: size entries */
  int fp_entries;
  std::string error;
};

static inline int fail(dt_nccl_ctx *ctx, int status, const std::string &message) {
  ctx->error = message;
  if (status == DT_ETIMEOUT || status == DT_EPEER) ctx->broken = true;
  return status;
}

#define CUDA_OR_FAIL(ctx, call)                                                                    \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess)                                                                         \
      return fail(ctx, DT_EINTERNAL, std::string(__FILE__ ":") + std::to_string(__LINE__) +        \
                                         ": " #call ": " + cudaGetErrorString(e_));                \
  } while (0)

static inline bool nccl_failed(int r) { return r != ncclSuccess && r != ncclInProgress; }

/* The status and message of NCCL result `r` of the call that `where` names. */
static inline int nccl_fail(dt_nccl_ctx *ctx, int r, const std::string &where) {
  return fail(ctx, r == ncclRemoteError || r == ncclSystemError ? DT_EPEER : DT_EINTERNAL,
              where + ": " + ctx->api->error_string(r) + ": " + ctx->api->last_error(ctx->comm));
}

#define NCCL_WHERE(call) (std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #call)

#define NCCL_OR_FAIL(ctx, call)                                                                    \
  do {                                                                                             \
    int r_ = (call);                                                                               \
    if (nccl_failed(r_)) return nccl_fail(ctx, r_, NCCL_WHERE(call));                              \
  } while (0)

static inline double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Waits for the work enqueued on the communication stream, an NCCL error, or the timeout; on a
 * timeout or error the communicator is aborted, so no rank waits for it forever. */
static inline int wait_done(dt_nccl_ctx *ctx, const std::string &label) {
  CUDA_OR_FAIL(ctx, cudaEventRecord(ctx->done, ctx->stream));
  double deadline = now_ms() + (double)ctx->timeout_ms;
  for (int polls = 0;; polls++) {
    cudaError_t q = cudaEventQuery(ctx->done);
    if (q == cudaSuccess) return DT_OK;
    if (q != cudaErrorNotReady) {
      /* The device failed under the collective: its work may never finish, so the communicator is
       * aborted here (destroying it later would wait for that work) and the context is broken. */
      ctx->api->comm_abort(ctx->comm);
      ctx->comm = NULL;
      ctx->broken = true;
      return fail(ctx, DT_EINTERNAL, label + ": the device failed: " + cudaGetErrorString(q));
    }
    int async = ncclSuccess;
    ctx->api->comm_get_async_error(ctx->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      std::string why = ctx->api->error_string(async);
      ctx->api->comm_abort(ctx->comm);
      ctx->comm = NULL;
      return fail(ctx,
                  async == ncclRemoteError || async == ncclSystemError ? DT_EPEER : DT_EINTERNAL,
                  label + ": NCCL failed (" + why + "): a peer may have died or left");
    }
    if (now_ms() > deadline) {
      ctx->api->comm_abort(ctx->comm);
      ctx->comm = NULL;
      return fail(ctx, DT_ETIMEOUT, label + ": timed out after " +
                                        std::to_string(ctx->timeout_ms) +
                                        " ms; the NCCL communicator was aborted");
    }
    /* 50 us polls for the first 10 ms (a small collective's latency), then 1 ms: a collective
     * waiting on a slow peer should not take a core from the ranks that compute. */
    struct timespec pause = {0, (polls < 200 ? 50 : 1000) * 1000};
    nanosleep(&pause, NULL);
  }
}

