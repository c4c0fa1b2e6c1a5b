// The first message of every collective (see [Note: fingerprint] in fingerprint.cc): what
// it carries, where it lands, and runCollective, the one function every collective goes through.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "internal.h"

namespace dtrain {

// kEmptyShared is the shared-memory transport's collective allocation (csrc/shm/shared_buffer.cc).
enum Kind : int32_t {
  kAllReduce = 1,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kBarrier,
  kEmptyShared
};

const char* kindName(int32_t kind);

// What a rank is about to do; every rank sends it to every other rank before any payload.
struct Fingerprint {
  uint64_t seq;
  uint64_t count;  // elements this rank sends
  int32_t kind;
  int32_t dtype;
  int32_t op;    // reduce op, or -1
  int32_t root;  // broadcast root, or -1
};
static_assert(sizeof(Fingerprint) == 32, "fingerprint travels as 32 raw bytes");

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

// "allReduce (op #17)": how errors name the collective.
std::string opLabel(const Fingerprint& fp);

// The first difference between group rank 0's fingerprint and another's, worded the same on
// every rank ("" when all agree); `globalRanks` maps group ranks to the job ranks it names.
// Shared with the shared-memory transport (csrc/shm), which checks the same fingerprints.
std::string mismatchMessage(const std::vector<int>& globalRanks,
                            const std::vector<Fingerprint>& all);

// The single entry point of every collective: checks the context, exchanges first messages
// (fingerprint and any inline payload), then runs `payload`, which may read the inbox.
// fp.seq is assigned here.
void runCollective(dt_gloo_ctx* ctx, Fingerprint fp, const Outgoing& out,
                   const std::function<void()>& payload);

}  // namespace dtrain
