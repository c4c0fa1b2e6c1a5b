// The first message of every collective (see [Note: fingerprint] in fingerprint.cc): what
// it carries, where it lands, and runCollective, the one function every collective goes through.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "internal.h"
#include "mismatch.h"

namespace dtrain {

// The layout is shared with the shared-memory transport and the NCCL shim (collective_codes.h).
using Fingerprint = dt_fingerprint;

constexpr size_t kHeader = sizeof(Fingerprint);

// Where group rank `rank`'s first message to us lands: its header, then any inline payload.
inline char* inboxOf(dt_gloo_ctx* ctx, int rank) {
  return reinterpret_cast<char*>(ctx->inbox_mem.data()) + rank * ctx->region;
}

// Where our first message is staged: region 0 when every peer gets the same, region `rank`
// when each gets its own.
inline char* stageOf(dt_gloo_ctx* ctx, int rank) {
  return reinterpret_cast<char*>(ctx->stage_mem.data()) + rank * ctx->region;
}

// What this rank puts after its header: `bytes` of payload, the same for every peer or
// (perPeer) different for each; `fill` writes the payload meant for `peer` to `dst`.
struct Outgoing {
  size_t bytes = 0;
  bool perPeer = false;
  std::function<void(char* dst, int peer)> fill;
};

// The single entry point of every collective: checks the context, exchanges first messages
// (fingerprint and any inline payload), then runs `payload`, which may read the inbox.
// fp.seq is assigned here.
void runCollective(dt_gloo_ctx* ctx, Fingerprint fp, const Outgoing& out,
                   const std::function<void()>& payload);

}  // namespace dtrain
