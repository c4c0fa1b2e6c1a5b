// The fingerprint protocol: every collective opens with one all-to-all of first messages
// that say what each rank is about to do (and, when small, carry the payload itself).
#include <gloo/common/error.h>
#include <gloo/types.h>
#include <string.h>

#include <algorithm>

#include "errors.h"
#include "fingerprint.h"

namespace dtrain {

// [Note: fingerprint]
// Before touching any user buffer, every rank sends every other rank a first message saying
// what it is about to do. Gloo matches messages by slot only, so ranks that disagree on the
// collective or its size would otherwise hang, read garbage, or abort inside Gloo's event
// loop. The exchange is all-to-all in one round, so it doubles as the barrier, and every
// rank derives the same error message from the same table.
//
// To keep the check from costing a round trip on small collectives, the first message also
// carries the payload when it is at most `inline_bytes`: an all-reduce then is this single
// all-to-all plus a local reduction in rank order (bitwise identical on every rank), which is
// faster than Gloo's ring even before counting the check. Receives are posted into fixed
// regions of `region` bytes, a size every rank agrees on, so a peer that disagrees on the
// size cannot overflow them; its payload is never read because its fingerprint fails first.
// They are posted when a collective starts, not ahead for the next one: a receive posts a
// notification to the peer, and a peer that has already finished and closes its socket with
// that notification unread resets the connection, losing data we may not have read yet.

void setupFirstMessages(dt_gloo_ctx* ctx) {
  auto& g = *ctx->gloo;
  const size_t n = static_cast<size_t>(g.size);
  if (n < 2) return;
  // 256 KiB inline for small groups, less for large ones: (n-1) regions are posted per op.
  ctx->inline_bytes = std::min<size_t>(256 * 1024, std::max<size_t>(4096, (1 << 20) / (n - 1)));
  ctx->inline_bytes &= ~size_t(63);
  ctx->region = kHeader + ctx->inline_bytes;
  ctx->inbox_mem.assign(n * ctx->region / sizeof(uint64_t), 0);
  ctx->stage_mem.assign(n * ctx->region / sizeof(uint64_t), 0);
  ctx->inbox = g.createUnboundBuffer(ctx->inbox_mem.data(), n * ctx->region);
  ctx->stage = g.createUnboundBuffer(ctx->stage_mem.data(), n * ctx->region);
}

namespace {

uint64_t firstMessageSlot(uint64_t seq) {
  return gloo::Slot::build(kFingerprintSlotPrefix, static_cast<uint32_t>(seq));
}

void postInbox(dt_gloo_ctx* ctx, uint64_t seq) {
  auto& g = *ctx->gloo;
  for (int i = 0; i < g.size; i++) {
    if (i != g.rank) ctx->inbox->recv(i, firstMessageSlot(seq), i * ctx->region, ctx->region);
  }
}

// Sends this rank's first messages, receives everyone's, and checks the fingerprints. On
// return every peer's first message is in its inbox region.
void exchangeFirstMessages(dt_gloo_ctx* ctx, const Fingerprint& mine, const Outgoing& out) {
  auto& g = *ctx->gloo;
  const int n = g.size;
  const int me = g.rank;
  for (int i = 0; i < (out.perPeer ? n : 1); i++) {
    if (out.perPeer && i == me) continue;
    memcpy(stageOf(ctx, i), &mine, kHeader);
    if (out.bytes > 0) out.fill(stageOf(ctx, i) + kHeader, i);
  }
  std::vector<bool> arrived(n, false);  // their first message reached us
  std::vector<bool> sent(n, false);     // ours left for them
  arrived[me] = sent[me] = true;
  auto deadline = std::chrono::steady_clock::now() + ctx->timeout;
  try {
    postInbox(ctx, mine.seq);
    for (int i = 0; i < n; i++) {
      if (i == me) continue;
      size_t at = out.perPeer ? i * ctx->region : 0;
      ctx->stage->send(i, firstMessageSlot(mine.seq), at, kHeader + out.bytes);
    }
    for (int k = 1; k < n; k++) {
      int src = -1;
      ctx->inbox->waitRecv(&src, remaining(deadline));
      if (src >= 0 && src < n) arrived[src] = true;
    }
    for (int k = 1; k < n; k++) {
      int dst = -1;
      ctx->stage->waitSend(&dst, remaining(deadline));
      if (dst >= 0 && dst < n) sent[dst] = true;
    }
  } catch (const gloo::Exception& e) {
    std::string detail = withoutLocation(e.what());
    if (detail.find("Timed out") == std::string::npos) transportFailure(ctx, mine, e);
    auto ranksWhere = [&](const std::vector<bool>& done) {
      std::string list;
      int count = 0;
      for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        list += (count++ ? ", " : "") + std::to_string(ctx->jobRank(i));
      }
      return (count > 1 ? "ranks " : "rank ") + list;
    };
    auto waited = std::find(arrived.begin(), arrived.end(), false) != arrived.end()
                      ? ranksWhere(arrived) + " to join"
                      : ranksWhere(sent) + " to accept our message (did it stop reading?)";
    abortWith(ctx, DT_ETIMEOUT, opLabel(mine) + ": timed out after " +
                                    std::to_string(ctx->timeout.count()) + " ms waiting for " +
                                    waited);
  }
  std::vector<Fingerprint> all(n);
  for (int i = 0; i < n; i++) {
    if (i == me) {
      all[i] = mine;
    } else {
      memcpy(&all[i], inboxOf(ctx, i), kHeader);
    }
  }
  auto mismatch = mismatchMessage(ctx->global_ranks, all.data(), all.size());
  // Every first message of this op has arrived and been sent, so the group stays usable.
  if (!mismatch.empty()) throw Failure(DT_EMISMATCH, mismatch);
}

}  // namespace

void runCollective(dt_gloo_ctx* ctx, Fingerprint fp, const Outgoing& out,
                   const std::function<void()>& payload) {
  if (!ctx->gloo) throw Failure(DT_EINVAL, std::string(dt_collective_name(fp.kind)) +
                                               ": context is not connected");
  if (!ctx->broken.empty()) {
    throw Failure(DT_EBROKEN, std::string(dt_collective_name(fp.kind)) +
                                  ": process group is unusable after an earlier failure: " +
                                  ctx->broken);
  }
  fp.seq = ++ctx->seq;
  if (ctx->gloo->size == 1) {
    payload();
    return;
  }
  exchangeFirstMessages(ctx, fp, out);
  try {
    payload();
  } catch (const gloo::Exception& e) {
    transportFailure(ctx, fp, e);
  }
}

}  // namespace dtrain
