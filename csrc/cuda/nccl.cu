/* The NCCL shim: one communicator per process group on a device, with the Gloo shim's contract
 * (csrc/gloo/dtrain_gloo.h): the same status codes and fingerprint (csrc/gloo/collective_codes.h),
 * a fingerprint check before every collective with the same messages (csrc/gloo/mismatch.h), a
 * timeout on every call after which the communicator is aborted (ncclCommAbort), and a peer's
 * death reported as EPEER. NCCL itself comes from dlopen (libs.cu).
 *
 * [Note: NCCL streams]
 * Collectives run on the communicator's own stream. The process group calls dt_nccl_mark on the
 * JavaScript thread just before a collective: it records an event on the device's compute stream
 * after the kernels that produced the buffer, and the communication stream waits for that event,
 * so compute and communication are ordered without the host waiting. The collective itself is a
 * nonblocking FFI call: it enqueues the work and polls for its completion (or an NCCL error, or
 * the timeout) on a worker thread, so its promise settles when the buffer holds the result. */
#include <string.h>
#include <time.h>

#include <mutex>
#include <string>
#include <vector>

#include "../gloo/collective_codes.h"
#include "../gloo/mismatch.h"
#include "nccl_ctx.cuh"

/* Opens a collective: checks the context, orders it after the marked compute work, and
 * exchanges fingerprints (an all-gather of 32 bytes a rank, which also serves as the barrier). */
static int begin(dt_nccl_ctx *ctx, dt_fingerprint mine, std::string &label) {
  if (ctx->broken || ctx->comm == NULL)
    return fail(ctx, DT_EBROKEN,
                "the NCCL communicator failed earlier (" + ctx->error + ") and can no longer be used");
  mine.seq = ++ctx->seq;
  label = coll::opLabel(mine);
  CUDA_OR_FAIL(ctx, cudaSetDevice(ctx->device));
  CUDA_OR_FAIL(ctx, cudaStreamWaitEvent(ctx->stream, ctx->ready, 0));
  ctx->fp_host[ctx->rank] = mine;
  CUDA_OR_FAIL(ctx, cudaMemcpyAsync(ctx->fp_dev + ctx->rank, &ctx->fp_host[ctx->rank],
                                    sizeof mine, cudaMemcpyHostToDevice, ctx->stream));
  NCCL_OR_FAIL(ctx, ctx->api->all_gather(ctx->fp_dev + ctx->rank, ctx->fp_dev, sizeof mine,
                                         ncclUint8, ctx->comm, ctx->stream));
  CUDA_OR_FAIL(ctx, cudaMemcpyAsync(ctx->fp_host, ctx->fp_dev, sizeof mine * ctx->size,
                                    cudaMemcpyDeviceToHost, ctx->stream));
  int st = wait_done(ctx, label);
  if (st != DT_OK) return st;
  std::string diff = coll::mismatchMessage(ctx->global_ranks, ctx->fp_host, ctx->size);
  if (!diff.empty()) return fail(ctx, DT_EMISMATCH, diff);
  return DT_OK;
}

/* Indexed by the collective dtype code (collective_codes.h; 2, bool, takes no collective). NCCL
 * sums bf16 and f16 in their own type one step at a time, rounding each, as [Note: half
 * reductions] in csrc/gloo/reduce.cc describes. */
static const int nccl_dtypes[] = {ncclFloat32, ncclInt32, -1, ncclBfloat16, ncclFloat16};
static const int nccl_ops[] = {ncclSum, ncclAvg, ncclMin, ncclMax, ncclProd};

/* A dtype (and op, for reductions; -1: none) the tables above hold, or DT_EINVAL: an index past
 * them would hand NCCL whatever memory follows. */
static int check_codes(dt_nccl_ctx *ctx, int32_t dtype, int32_t op) {
  if (dtype < 0 || dtype >= (int32_t)(sizeof nccl_dtypes / sizeof nccl_dtypes[0]) ||
      nccl_dtypes[dtype] < 0)
    return fail(ctx, DT_EINVAL, "nccl: dtype code " + std::to_string(dtype) + " takes no collective");
  if (op != -1 && (op < 0 || op >= (int32_t)(sizeof nccl_ops / sizeof nccl_ops[0])))
    return fail(ctx, DT_EINVAL, "nccl: reduce op code " + std::to_string(op) + " is unknown");
  return DT_OK;
}

/* ---------------------------------------------------------------- the C ABI */

/* The 128 bytes every rank of a communicator must share (rank 0 makes them, the store carries). */
DT_EXPORT int dt_nccl_unique_id(uint8_t *out) {
  CHECK_PTR(out);
  const dt_nccl_api *api = dt_nccl();
  if (api == NULL) return DT_EUNSUPPORTED;
  ncclUniqueId id;
  int r = api->get_unique_id(&id);
  if (r != ncclSuccess) return dt_fail(DT_EDEVICE, "ncclGetUniqueId: %s", api->error_string(r));
  memcpy(out, id.internal, sizeof id.internal);
  return DT_OK;
}

/* Pinned fingerprint blocks of freed contexts, for later contexts to reuse: cudaFreeHost would
 * wait for the whole device, so behind another communicator's collective blocked on a peer. */
struct spare_block {
  dt_fingerprint *host;
  int entries;
};
static std::vector<spare_block> spare_blocks;
static std::mutex spare_mutex;

static int take_fingerprint_block(dt_nccl_ctx *ctx) {
  {
    std::lock_guard<std::mutex> lock(spare_mutex);
    for (size_t i = 0; i < spare_blocks.size(); i++) {
      if (spare_blocks[i].entries < ctx->size) continue;
      ctx->fp_host = spare_blocks[i].host;
      ctx->fp_entries = spare_blocks[i].entries;
      spare_blocks.erase(spare_blocks.begin() + (long)i);
      return DT_OK;
    }
  }
  cudaCheck(cudaHostAlloc((void **)&ctx->fp_host, sizeof(dt_fingerprint) * ctx->size,
                          cudaHostAllocPortable));
  ctx->fp_entries = ctx->size;
  return DT_OK;
}

/* The context's stream, events and fingerprint buffers, on the current device. The device buffer
 * is stream-ordered on the context's stream, so dt_nccl_ctx_free frees it there. */
static int make_resources(dt_nccl_ctx *ctx) {
  cudaCheck(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
  cudaCheck(cudaEventCreateWithFlags(&ctx->ready, cudaEventDisableTiming));
  cudaCheck(cudaEventCreateWithFlags(&ctx->done, cudaEventDisableTiming));
  int st = take_fingerprint_block(ctx);
  if (st != DT_OK) return st;
  cudaCheck(cudaMallocAsync((void **)&ctx->fp_dev, sizeof(dt_fingerprint) * ctx->size,
                            ctx->stream));
  return DT_OK;
}

/* A context on `device` for a group of `size` (its stream and events); connect it next. */
DT_EXPORT int dt_nccl_ctx_new(int32_t device, int32_t rank, int32_t size,
                              const int32_t *global_ranks, int64_t timeout_ms, void **out) {
  CHECK_PTR(out); CHECK_PTR(global_ranks);
  CHECK(size > 0 && rank >= 0 && rank < size, "nccl: rank %d of a group of %d", rank, size);
  const dt_nccl_api *api = dt_nccl();
  if (api == NULL) return DT_EUNSUPPORTED;
  /* Sets the device up (its compute stream is what collectives wait for), then gives the calling
   * thread its device back: the kernels' caller tracks which device is current. */
  int previous = dt_cuda_current_index();
  int st = dt_cuda_use_device(device);
  if (st == DT_OK && previous >= 0) st = dt_cuda_use_device(previous);
  if (st != DT_OK) return st;
  dt_nccl_ctx *ctx = new dt_nccl_ctx();
  ctx->api = api;
  ctx->device = device;
  ctx->rank = rank;
  ctx->size = size;
  ctx->timeout_ms = timeout_ms;
  ctx->global_ranks.assign(global_ranks, global_ranks + size);
  *out = ctx;
  int here = 0;
  cudaCheck(cudaGetDevice(&here));
  cudaCheck(cudaSetDevice(device));
  int made = make_resources(ctx);
  cudaCheck(cudaSetDevice(here));
  return made;
}

/* The collective rendezvous (blocking in NCCL, hence a nonblocking FFI call). */
DT_EXPORT int dt_nccl_connect(void *handle, const uint8_t *id) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  ncclUniqueId uid;
  memcpy(uid.internal, id, sizeof uid.internal);
  CUDA_OR_FAIL(ctx, cudaSetDevice(ctx->device));
  int r = ctx->api->comm_init_rank(&ctx->comm, ctx->size, uid, ctx->rank);
  if (r != ncclSuccess) {
    ctx->comm = NULL;
    /* NCCL's own account (a rank that never came, an address it could not reach) is the part a
     * user acts on; the result code alone says only "remote error". */
    const char *why = ctx->api->last_error(NULL);
    return fail(ctx, r == ncclRemoteError || r == ncclSystemError ? DT_EPEER : DT_EINTERNAL,
                std::string("ncclCommInitRank: ") + ctx->api->error_string(r) +
                    (why != NULL && why[0] != '\0' ? std::string(": ") + why : ""));
  }
  return DT_OK;
}

DT_EXPORT int dt_nccl_last_error(void *handle, char *buf, int64_t len) {
  const char *msg = handle ? ((dt_nccl_ctx *)handle)->error.c_str() : "";
  if (buf != NULL && len > 0) snprintf(buf, (size_t)len, "%s", msg);
  return (int)strlen(msg);
}

/* Orders the next collective after the compute work queued so far (see [Note: NCCL streams]). */
DT_EXPORT int dt_nccl_mark(void *handle) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  /* On the JavaScript thread: its current device is left as it was. */
  int here = 0;
  CUDA_OR_FAIL(ctx, cudaGetDevice(&here));
  CUDA_OR_FAIL(ctx, cudaSetDevice(ctx->device));
  cudaError_t recorded = cudaEventRecord(ctx->ready, dt_cuda_compute_stream(ctx->device));
  CUDA_OR_FAIL(ctx, cudaSetDevice(here));
  CUDA_OR_FAIL(ctx, recorded);
  return DT_OK;
}

DT_EXPORT int dt_nccl_allreduce(void *handle, void *buf, uint64_t count, int32_t dtype, int32_t op) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  int codes = check_codes(ctx, dtype, op);
  if (codes != DT_OK) return codes;
  std::string label;
  int st = begin(ctx, {0, count, coll::DT_ALLREDUCE, dtype, op, -1}, label);
  if (st != DT_OK) return st;
  NCCL_OR_FAIL(ctx, ctx->api->all_reduce(buf, buf, count, nccl_dtypes[dtype], nccl_ops[op],
                                         ctx->comm, ctx->stream));
  return wait_done(ctx, label);
}

DT_EXPORT int dt_nccl_broadcast(void *handle, void *buf, uint64_t count, int32_t dtype, int32_t root) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  int codes = check_codes(ctx, dtype, -1);
  if (codes != DT_OK) return codes;
  std::string label;
  int st = begin(ctx, {0, count, coll::DT_BROADCAST, dtype, -1, root}, label);
  if (st != DT_OK) return st;
  NCCL_OR_FAIL(ctx, ctx->api->broadcast(buf, buf, count, nccl_dtypes[dtype], root, ctx->comm,
                                        ctx->stream));
  return wait_done(ctx, label);
}

/* The all-gather into one buffer per rank: a broadcast from every root, in one NCCL group. Every
 * path after ncclGroupStart reaches ncclGroupEnd, since the group depth is the calling thread's
 * and an open group would swallow its later collectives. A failed broadcast leaves the group half
 * issued (the peers wait for roots this rank never posted), so the communicator is marked broken
 * and aborted at dt_nccl_ctx_free; the first failure is the one reported. */
static int gather_by_broadcasts(dt_nccl_ctx *ctx, const void *in, uint64_t count, int32_t dtype,
                                void *const *outs) {
  NCCL_OR_FAIL(ctx, ctx->api->group_start());
  int failed = ncclSuccess;
  std::string where;
  for (int r = 0; r < ctx->size && !nccl_failed(failed); r++) {
    failed = ctx->api->broadcast(in, outs[r], count, nccl_dtypes[dtype], r, ctx->comm,
                                 ctx->stream);
    if (nccl_failed(failed))
      where = NCCL_WHERE(ncclBroadcast) + " (root " + std::to_string(r) + ")";
  }
  int ended = ctx->api->group_end();
  if (!nccl_failed(failed) && !nccl_failed(ended)) return DT_OK;
  int st = nccl_failed(failed) ? nccl_fail(ctx, failed, where)
                               : nccl_fail(ctx, ended, NCCL_WHERE(ncclGroupEnd));
  ctx->broken = true;
  return st;
}

/* outs: one buffer of size * count elements, or one of count elements per rank. */
DT_EXPORT int dt_nccl_allgather(void *handle, const void *in, uint64_t count, int32_t dtype,
                                void *const *outs, uint64_t nouts) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  int codes = check_codes(ctx, dtype, -1);
  if (codes != DT_OK) return codes;
  std::string label;
  int st = begin(ctx, {0, count, coll::DT_ALLGATHER, dtype, -1, -1}, label);
  if (st != DT_OK) return st;
  if (nouts == 1) {
    NCCL_OR_FAIL(ctx, ctx->api->all_gather(in, outs[0], count, nccl_dtypes[dtype], ctx->comm,
                                           ctx->stream));
  } else {
    st = gather_by_broadcasts(ctx, in, count, dtype, outs);
    if (st != DT_OK) return st;
  }
  return wait_done(ctx, label);
}

DT_EXPORT int dt_nccl_reduce_scatter(void *handle, void *out, const void *in, uint64_t out_count,
                                     int32_t dtype, int32_t op) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  int codes = check_codes(ctx, dtype, op);
  if (codes != DT_OK) return codes;
  std::string label;
  int st = begin(ctx, {0, out_count * ctx->size, coll::DT_REDUCE_SCATTER, dtype, op, -1}, label);
  if (st != DT_OK) return st;
  NCCL_OR_FAIL(ctx, ctx->api->reduce_scatter(in, out, out_count, nccl_dtypes[dtype],
                                             nccl_ops[op], ctx->comm, ctx->stream));
  return wait_done(ctx, label);
}

/* The blocking collectives: the same ones on the JavaScript thread (FSDP's forward, tensor
 * parallelism), leaving the thread's current device as it was (begin sets the context's). */
template <typename Collective> static int keeping_device(void *handle, Collective collective) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  int here = 0;
  CUDA_OR_FAIL(ctx, cudaGetDevice(&here));
  int st = collective();
  cudaError_t restored = cudaSetDevice(here);
  if (st == DT_OK) CUDA_OR_FAIL(ctx, restored);
  return st;
}
#define KEEPING_DEVICE(call) return keeping_device(handle, [&] { return call; })
DT_EXPORT int dt_nccl_allgather_blocking(void *handle, const void *in, uint64_t count,
                                         int32_t dtype, void *const *outs, uint64_t nouts) {
  KEEPING_DEVICE(dt_nccl_allgather(handle, in, count, dtype, outs, nouts));
}
DT_EXPORT int dt_nccl_allreduce_blocking(void *handle, void *buf, uint64_t count, int32_t dtype,
                                         int32_t op) {
  KEEPING_DEVICE(dt_nccl_allreduce(handle, buf, count, dtype, op));
}
DT_EXPORT int dt_nccl_reduce_scatter_blocking(void *handle, void *out, const void *in,
                                              uint64_t out_count, int32_t dtype, int32_t op) {
  KEEPING_DEVICE(dt_nccl_reduce_scatter(handle, out, in, out_count, dtype, op));
}

/* The fingerprint exchange is an all-gather every rank must join: it is the barrier. */
DT_EXPORT int dt_nccl_barrier(void *handle) {
  std::string label;
  return begin((dt_nccl_ctx *)handle, {0, 0, coll::DT_BARRIER, 0, -1, -1}, label);
}

/* Destroys the communicator (aborts it when it failed) and frees the context. Nothing here waits
 * for the whole device (cudaFree, cudaFreeHost, cudaDeviceSynchronize): that would also wait for
 * the collectives of other communicators, which may be blocked on a peer. Ordering instead:
 * - destroying (or aborting) the communicator finishes (or kills) its collectives, so what is left
 *   on its stream is at most a fingerprint copy queued after them;
 * - the device fingerprints are freed on that stream (cudaFreeAsync), after everything using them;
 * - the wait on that stream alone then lets the pinned fingerprints go to a later context (a
 *   failed wait keeps them out of reuse: a copy may still land in them);
 * - the stream and its events are released by the driver once their work is done. */
DT_EXPORT int dt_nccl_ctx_free(void *handle) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  if (ctx == NULL) return DT_OK;
  int here = 0;
  cudaGetDevice(&here);
  cudaSetDevice(ctx->device);
  if (ctx->comm != NULL) (ctx->broken ? ctx->api->comm_abort : ctx->api->comm_destroy)(ctx->comm);
  if (ctx->stream) {
    if (ctx->fp_dev) cudaFreeAsync(ctx->fp_dev, ctx->stream);
    if (ctx->fp_host && cudaStreamSynchronize(ctx->stream) == cudaSuccess) {
      std::lock_guard<std::mutex> lock(spare_mutex);
      spare_blocks.push_back({ctx->fp_host, ctx->fp_entries});
    }
    cudaStreamDestroy(ctx->stream);
  }
  if (ctx->ready) cudaEventDestroy(ctx->ready);
  if (ctx->done) cudaEventDestroy(ctx->done);
  /* A failure above is this call's, not the next kernel launch's (LAUNCH_CHECK reads it). */
  cudaGetLastError();
  delete ctx;
  cudaSetDevice(here);
  return DT_OK;
}
