/* Point-to-point messages on NCCL: a batch of sends and receives in one NCCL group on the
 * communicator's stream, ordered after the compute marked with dt_nccl_mark, waited for as the
 * collectives are (the timeout aborts the communicator; a peer's death is EPEER). NCCL matches
 * the messages between two ranks in order, as the other backends do, but the header check of
 * [Note: point-to-point protocol] (csrc/gloo/p2p_message.h) is not made here: it would cost a
 * device round trip per message, so a mismatch on NCCL shows as a timeout, not as a mismatch. */
#include "nccl_ctx.cuh"

/* Indexed by the collective dtype code, as nccl.cu's table (bytes move as they are). */
static const int p2p_dtypes[] = {ncclFloat32, ncclInt32, -1, ncclBfloat16, ncclFloat16};

/* "send to rank 3", "recv from rank 1", or "batch of 4 messages": how errors name the batch. */
static std::string batch_label(dt_nccl_ctx *ctx, uint64_t n, const int32_t *kinds,
                               const int32_t *peers) {
  if (n != 1) return "batch of " + std::to_string(n) + " point-to-point messages";
  return std::string(kinds[0] == coll::DT_P2P_SEND ? "send to rank " : "recv from rank ") +
         std::to_string(ctx->global_ranks[peers[0]]);
}

DT_EXPORT int dt_nccl_p2p(void *handle, uint64_t n, const int32_t *kinds, const int32_t *peers,
                          void *const *bufs, const uint64_t *counts, const int32_t *dtypes) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  if (ctx == NULL) return DT_EINVAL;
  if (ctx->broken || ctx->comm == NULL)
    return fail(ctx, DT_EBROKEN,
                "the NCCL communicator failed earlier (" + ctx->error + ") and can no longer be used");
  for (uint64_t i = 0; i < n; i++) {
    if ((kinds[i] != coll::DT_P2P_SEND && kinds[i] != coll::DT_P2P_RECV) || peers[i] < 0 || peers[i] >= ctx->size ||
        peers[i] == ctx->rank || dtypes[i] < 0 || dtypes[i] > 4 || p2p_dtypes[dtypes[i]] < 0 ||
        (bufs[i] == NULL && counts[i] > 0))
      return fail(ctx, DT_EINVAL, "point-to-point message " + std::to_string(i) +
                                      ": bad kind, peer, dtype or buffer");
  }
  std::string label = batch_label(ctx, n, kinds, peers);
  CUDA_OR_FAIL(ctx, cudaSetDevice(ctx->device));
  CUDA_OR_FAIL(ctx, cudaStreamWaitEvent(ctx->stream, ctx->ready, 0));
  /* Every path after ncclGroupStart reaches ncclGroupEnd (see gather_by_broadcasts in nccl.cu). */
  NCCL_OR_FAIL(ctx, ctx->api->group_start());
  int failed = ncclSuccess;
  for (uint64_t i = 0; i < n && !nccl_failed(failed); i++) {
    const int dtype = p2p_dtypes[dtypes[i]];
    failed = kinds[i] == coll::DT_P2P_SEND ? ctx->api->send(bufs[i], counts[i], dtype, peers[i], ctx->comm,
                                            ctx->stream)
                           : ctx->api->recv(bufs[i], counts[i], dtype, peers[i], ctx->comm,
                                            ctx->stream);
  }
  int ended = ctx->api->group_end();
  if (nccl_failed(failed) || nccl_failed(ended)) {
    int st = nccl_fail(ctx, nccl_failed(failed) ? failed : ended, label);
    ctx->broken = true;
    return st;
  }
  return wait_done(ctx, label);
}

/* dt_nccl_p2p on the JavaScript thread, leaving its current device as it was. */
DT_EXPORT int dt_nccl_p2p_blocking(void *handle, uint64_t n, const int32_t *kinds,
                                   const int32_t *peers, void *const *bufs,
                                   const uint64_t *counts, const int32_t *dtypes) {
  dt_nccl_ctx *ctx = (dt_nccl_ctx *)handle;
  if (ctx == NULL) return DT_EINVAL;
  int here = 0;
  CUDA_OR_FAIL(ctx, cudaGetDevice(&here));
  int st = dt_nccl_p2p(handle, n, kinds, peers, bufs, counts, dtypes);
  cudaError_t restored = cudaSetDevice(here);
  if (st == DT_OK) CUDA_OR_FAIL(ctx, restored);
  return st;
}
