// Ring reduce-scatter over Gloo unbound buffers: n-1 steps of send right, receive left,
// fold, all under one deadline.
#include "ring_reduce_scatter.h"

#include <gloo/types.h>

#include <chrono>
#include <memory>
#include <vector>

namespace dtrain {

void ringReduceScatter(dt_gloo_ctx* ctx, void* out, const void* in,
                       size_t chunk, size_t elemSize, ReduceFn fn) {
  auto& g = ctx->gloo;
  const int n = g->size;
  const int r = g->rank;
  const size_t bytes = chunk * elemSize;
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  auto chunkOf = [&](int c) { return static_cast<const char*>(in) + ((c % n + n) % n) * bytes; };
  std::vector<char> scratch[2] = {std::vector<char>(bytes), std::vector<char>(bytes)};
  auto inBuf = g->createUnboundBuffer(const_cast<void*>(in), bytes * n);
  std::unique_ptr<gloo::transport::UnboundBuffer> scratchBuf[2] = {
      g->createUnboundBuffer(scratch[0].data(), bytes),
      g->createUnboundBuffer(scratch[1].data(), bytes)};
  auto outBuf = g->createUnboundBuffer(out, bytes);
  const uint64_t slot =
      gloo::Slot::build(kReduceScatterSlotPrefix, static_cast<uint32_t>(ctx->seq));
  const auto deadline = std::chrono::steady_clock::now() + ctx->timeout;
  for (int s = 0; s < n - 1; s++) {
    const bool last = s == n - 2;
    auto& recvInto = last ? outBuf : scratchBuf[s % 2];
    recvInto->recv(left, slot, 0, bytes);
    if (s == 0) {
      inBuf->send(right, slot, (((r - 1) % n + n) % n) * bytes, bytes);
    } else {
      scratchBuf[(s - 1) % 2]->send(right, slot, 0, bytes);
    }
    recvInto->waitRecv(remaining(deadline));
    fn(recvInto->ptr, recvInto->ptr, chunkOf(r - s - 2), chunk);
    (s == 0 ? inBuf : scratchBuf[(s - 1) % 2])->waitSend(remaining(deadline));
  }
}

}  // namespace dtrain
