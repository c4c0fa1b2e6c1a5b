// Collectives on raw pointers. Each one starts with an all-to-all of first messages that
// carry its fingerprint (and, when small, its payload), then moves any remaining payload
// with Gloo, and turns transport failures into errors that name the operation and the peer.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/types.h>
#include <string.h>

#include <algorithm>
#include <cctype>

#include "internal.h"

namespace {

using dtrain::Failure;

enum Kind : int32_t { kAllReduce = 1, kBroadcast, kAllGather, kReduceScatter, kBarrier };

const char* kindName(int32_t kind) {
  switch (kind) {
    case kAllReduce:
      return "allReduce";
    case kBroadcast:
      return "broadcast";
    case kAllGather:
      return "allGather";
    case kReduceScatter:
      return "reduceScatter";
    case kBarrier:
      return "barrier";
    default:
      return "unknown collective";
  }
}

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
struct Fingerprint {
  uint64_t seq;
  uint64_t count;  // elements this rank sends
  int32_t kind;
  int32_t dtype;
  int32_t op;    // reduce op, or -1
  int32_t root;  // broadcast root, or -1
};
static_assert(sizeof(Fingerprint) == 32, "fingerprint travels as 32 raw bytes");

// Slot prefixes of our own traffic; Gloo's algorithms use 0x01..0x08.
constexpr uint8_t kFingerprintSlotPrefix = 0x40;
constexpr uint8_t kReduceScatterSlotPrefix = 0x41;

std::string opLabel(const Fingerprint& fp) {
  return std::string(kindName(fp.kind)) + " (op #" + std::to_string(fp.seq) + ")";
}

// Gloo prefixes messages with "[file:line] "; the location means nothing to our users.
std::string withoutLocation(const std::string& message) {
  if (!message.empty() && message[0] == '[') {
    auto end = message.find("] ");
    if (end != std::string::npos) return message.substr(end + 2);
  }
  return message;
}

// The group rank whose address appears in a Gloo transport error, or -1.
int rankInMessage(const dt_gloo_ctx* ctx, const std::string& message) {
  for (const auto& [addr, rank] : ctx->peer_rank) {
    for (auto at = message.find(addr); at != std::string::npos;
         at = message.find(addr, at + 1)) {
      auto next = at + addr.size();
      if (next == message.size() || !isdigit(static_cast<unsigned char>(message[next]))) {
        return rank;
      }
    }
  }
  return -1;
}

// Marks the context broken and resets its connections, then throws an error naming the
// operation and, where known, the peer. Gloo's pairs are in an unknown state after an IO
// error; resetting them also makes every peer still blocked on us fail now instead of at
// its timeout, which is what lets a job notice a dead rank within seconds.
[[noreturn]] void abortWith(dt_gloo_ctx* ctx, dt_status status, const std::string& message) {
  ctx->broken = message;
  ctx->gloo->closeConnections();
  throw Failure(status, message);
}

// Turns a Gloo exception thrown during a collective (a timeout or a failed connection)
// into our error, and aborts the context.
[[noreturn]] void transportFailure(dt_gloo_ctx* ctx, const Fingerprint& fp,
                                   const std::exception& e) {
  auto detail = withoutLocation(e.what());
  std::string message;
  dt_status status;
  if (detail.find("Timed out") != std::string::npos ||
      detail.find("timeout") != std::string::npos) {
    status = DT_ETIMEOUT;
    message = opLabel(fp) + ": timed out after " + std::to_string(ctx->timeout.count()) +
              " ms waiting for a peer (" + detail + ")";
  } else {
    status = DT_EPEER;
    int peer = rankInMessage(ctx, detail);
    message = opLabel(fp) + ": connection to " +
              (peer >= 0 ? ctx->rankName(peer) : std::string("a peer")) +
              " failed (" + detail + ")";
  }
  abortWith(ctx, status, message);
}

// Compares every rank with group rank 0, so every rank reports the same first difference.
std::string mismatchMessage(const dt_gloo_ctx* ctx, const std::vector<Fingerprint>& all) {
  const auto& ref = all[0];
  const auto first = ctx->rankName(0);
  for (size_t j = 1; j < all.size(); j++) {
    const auto& fp = all[j];
    auto rank = ctx->rankName(static_cast<int>(j));
    auto tail = " (op #" + std::to_string(ref.seq) + ")";
    if (fp.kind != ref.kind) {
      return "op #" + std::to_string(ref.seq) + ": " + rank + " called " + kindName(fp.kind) +
             ", " + first + " called " + kindName(ref.kind);
    }
    std::string name = kindName(ref.kind);
    if (fp.count != ref.count || fp.dtype != ref.dtype) {
      return name + ": " + rank + " sent " + std::to_string(fp.count) + " " +
             dtrain::dtypeName(fp.dtype) + " elements, " + first + " expected " +
             std::to_string(ref.count) +
             (fp.dtype != ref.dtype ? std::string(" ") + dtrain::dtypeName(ref.dtype) + " elements"
                                    : "") +
             tail;
    }
    if (fp.op != ref.op) {
      return name + ": " + rank + " reduces with " + dtrain::reduceOpName(fp.op) +
             ", " + first + " expected " + dtrain::reduceOpName(ref.op) + tail;
    }
    if (fp.root != ref.root) {
      return name + ": " + rank + " uses root " + std::to_string(ctx->jobRank(fp.root)) + ", " +
             first + " expected root " + std::to_string(ctx->jobRank(ref.root)) + tail;
    }
  }
  return "";
}

std::chrono::milliseconds remaining(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : std::chrono::milliseconds(1);
}

constexpr size_t kHeader = sizeof(Fingerprint);

char* inboxOf(dt_gloo_ctx* ctx, int rank) {
  return reinterpret_cast<char*>(ctx->inbox_mem.data()) + rank * ctx->region;
}

char* stageOf(dt_gloo_ctx* ctx, int rank) {
  return reinterpret_cast<char*>(ctx->stage_mem.data()) + rank * ctx->region;
}

uint64_t firstMessageSlot(uint64_t seq) {
  return gloo::Slot::build(kFingerprintSlotPrefix, static_cast<uint32_t>(seq));
}

void postInbox(dt_gloo_ctx* ctx, uint64_t seq) {
  auto& g = *ctx->gloo;
  for (int i = 0; i < g.size; i++) {
    if (i != g.rank) ctx->inbox->recv(i, firstMessageSlot(seq), i * ctx->region, ctx->region);
  }
}

// What this rank puts after its header: `bytes` of payload, the same for every peer or
// (perPeer) different for each; `fill` writes the payload meant for `peer` to `dst`.
struct Outgoing {
  size_t bytes = 0;
  bool perPeer = false;
  std::function<void(char* dst, int peer)> fill;
};

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
  auto mismatch = mismatchMessage(ctx, all);
  // Every first message of this op has arrived and been sent, so the group stays usable.
  if (!mismatch.empty()) throw Failure(DT_EMISMATCH, mismatch);
}

// The single entry point of every collective: checks the context, exchanges first messages
// (fingerprint and any inline payload), then runs `payload`, which may read the inbox.
void run(dt_gloo_ctx* ctx, Fingerprint fp, const Outgoing& out,
         const std::function<void()>& payload) {
  if (!ctx->gloo) throw Failure(DT_EINVAL, std::string(kindName(fp.kind)) +
                                               ": context is not connected");
  if (!ctx->broken.empty()) {
    throw Failure(DT_EBROKEN, std::string(kindName(fp.kind)) +
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

void checkDtype(const char* what, int dtype) {
  if (dtrain::dtypeSize(dtype) == 0) {
    throw Failure(DT_EINVAL, std::string(what) + ": unknown dtype code " + std::to_string(dtype));
  }
}

dtrain::ReduceFn checkReduce(const char* what, int dtype, int op) {
  checkDtype(what, dtype);
  if (op == DT_AVG && dtype != DT_F32) {
    throw Failure(DT_EINVAL, std::string(what) + ": op avg needs f32, got " +
                                 dtrain::dtypeName(dtype));
  }
  auto fn = dtrain::reduceFn(dtype, op);
  if (fn == nullptr) {
    throw Failure(DT_EINVAL, std::string(what) + ": unknown reduce op code " + std::to_string(op));
  }
  return fn;
}

void checkPointer(const char* what, const void* ptr, uint64_t count) {
  if (ptr == nullptr && count > 0) throw Failure(DT_EINVAL, std::string(what) + ": null buffer");
}

// Gloo's option setters are typed; f32 and i32 share a size, so one element type serves both.
using Elem = float;

// Ring reduce-scatter over unbound buffers: n-1 steps; at step s rank r sends its partial
// sum of chunk (r-s-1) mod n to the right and folds chunk (r-s-2) mod n from the left into
// its own input. After the last step rank r holds the full reduction of chunk r.
void ringReduceScatter(dt_gloo_ctx* ctx, void* out, const void* in,
                       size_t chunk, size_t elemSize, dtrain::ReduceFn fn) {
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

}  // namespace

namespace dtrain {

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

}  // namespace dtrain

extern "C" {

int dt_gloo_allreduce(dt_gloo_ctx* ctx, void* buf, uint64_t count, int dtype, int op) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return dtrain::guard(ctx, [&] {
    auto fn = checkReduce("allReduce", dtype, op);
    checkPointer("allReduce", buf, count);
    const size_t bytes = count * dtrain::dtypeSize(dtype);
    const bool inlined = bytes <= ctx->inline_bytes;
    Outgoing out;
    if (inlined) {
      out.bytes = bytes;
      out.fill = [&](char* dst, int) { memcpy(dst, buf, bytes); };
    }
    run(ctx, {0, count, kAllReduce, dtype, op, -1}, out, [&] {
      const int n = ctx->gloo->size;
      if (count == 0) return;
      if (n > 1 && inlined) {
        // Reduce in rank order so that every rank computes bitwise the same result; this
        // rank's own input is read from its staged copy since `buf` is the accumulator.
        const int me = ctx->gloo->rank;
        auto input = [&](int r) -> const void* {
          return r == me ? stageOf(ctx, 0) + kHeader : inboxOf(ctx, r) + kHeader;
        };
        fn(buf, input(0), input(1), count);
        for (int r = 2; r < n; r++) fn(buf, buf, input(r), count);
      } else if (n > 1) {
        gloo::AllreduceOptions opts(ctx->gloo);
        opts.setOutput(static_cast<Elem*>(buf), count);
        opts.setReduceFunction(fn);
        opts.setTag(static_cast<uint32_t>(ctx->seq));
        opts.setTimeout(ctx->timeout);
        gloo::allreduce(opts);
      }
      if (op == DT_AVG) dtrain::divideInPlace(static_cast<float*>(buf), count, n);
    });
  });
}

int dt_gloo_broadcast(dt_gloo_ctx* ctx, void* buf, uint64_t count, int dtype, int root) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return dtrain::guard(ctx, [&] {
    checkDtype("broadcast", dtype);
    checkPointer("broadcast", buf, count);
    if (ctx->gloo && (root < 0 || root >= ctx->gloo->size)) {
      throw Failure(DT_EINVAL, "broadcast: root " + std::to_string(root) +
                                   " is outside world size " + std::to_string(ctx->gloo->size));
    }
    const size_t bytes = count * dtrain::dtypeSize(dtype);
    const bool inlined = bytes <= ctx->inline_bytes;
    Outgoing out;
    if (inlined && ctx->gloo && ctx->gloo->rank == root) {
      out.bytes = bytes;
      out.fill = [&](char* dst, int) { memcpy(dst, buf, bytes); };
    }
    run(ctx, {0, count, kBroadcast, dtype, -1, root}, out, [&] {
      if (count == 0 || ctx->gloo->size == 1) return;
      if (inlined) {
        if (ctx->gloo->rank != root) memcpy(buf, inboxOf(ctx, root) + kHeader, bytes);
        return;
      }
      gloo::BroadcastOptions opts(ctx->gloo);
      opts.setOutput(static_cast<Elem*>(buf), count);
      opts.setRoot(root);
      opts.setTag(static_cast<uint32_t>(ctx->seq));
      opts.setTimeout(ctx->timeout);
      gloo::broadcast(opts);
    });
  });
}

int dt_gloo_allgather(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype,
                      void* const* outs, uint64_t nouts) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return dtrain::guard(ctx, [&] {
    checkDtype("allGather", dtype);
    checkPointer("allGather", in, count);
    const uint64_t n = ctx->gloo ? static_cast<uint64_t>(ctx->gloo->size) : 0;
    if (outs == nullptr || (nouts != 1 && nouts != n)) {
      throw Failure(DT_EINVAL, "allGather: expected 1 flat output or " + std::to_string(n) +
                                   " outputs, got " + std::to_string(nouts));
    }
    for (uint64_t i = 0; i < nouts; i++) checkPointer("allGather", outs[i], count);
    const size_t bytes = count * dtrain::dtypeSize(dtype);
    const bool inlined = bytes <= ctx->inline_bytes;
    Outgoing out;
    if (inlined) {
      out.bytes = bytes;
      out.fill = [&](char* dst, int) { memcpy(dst, in, bytes); };
    }
    // Where rank r's contribution goes.
    auto slice = [&](uint64_t r) {
      return nouts == 1 ? static_cast<char*>(outs[0]) + r * bytes : static_cast<char*>(outs[r]);
    };
    run(ctx, {0, count, kAllGather, dtype, -1, -1}, out, [&] {
      if (count == 0) return;
      const int me = ctx->gloo->rank;
      if (n == 1 || inlined) {
        for (uint64_t r = 0; r < n; r++) {
          const char* src = static_cast<int>(r) == me ? static_cast<const char*>(in)
                                                      : inboxOf(ctx, r) + kHeader;
          memmove(slice(r), src, bytes);
        }
        return;
      }
      std::vector<char> staging(nouts == 1 ? 0 : n * bytes);
      char* flat = nouts == 1 ? static_cast<char*>(outs[0]) : staging.data();
      gloo::AllgatherOptions opts(ctx->gloo);
      opts.setInput(const_cast<Elem*>(static_cast<const Elem*>(in)), count);
      opts.setOutput(reinterpret_cast<Elem*>(flat), n * count);
      opts.setTag(static_cast<uint32_t>(ctx->seq));
      opts.setTimeout(ctx->timeout);
      gloo::allgather(opts);
      if (nouts != 1) {
        for (uint64_t r = 0; r < n; r++) memcpy(slice(r), flat + r * bytes, bytes);
      }
    });
  });
}

int dt_gloo_reduce_scatter(dt_gloo_ctx* ctx, void* out, const void* in, uint64_t out_count,
                           int dtype, int op) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return dtrain::guard(ctx, [&] {
    auto fn = checkReduce("reduceScatter", dtype, op);
    checkPointer("reduceScatter", out, out_count);
    checkPointer("reduceScatter", in, out_count);
    const uint64_t n = ctx->gloo ? static_cast<uint64_t>(ctx->gloo->size) : 0;
    const size_t bytes = out_count * dtrain::dtypeSize(dtype);
    auto o = static_cast<const char*>(out);
    auto i = static_cast<const char*>(in);
    if (out_count > 0 && o < i + n * bytes && i < o + bytes) {
      throw Failure(DT_EINVAL, "reduceScatter: output overlaps input");
    }
    const bool inlined = bytes <= ctx->inline_bytes;
    Outgoing msg;
    if (inlined) {
      msg.bytes = bytes;
      msg.perPeer = true;
      msg.fill = [&](char* dst, int peer) { memcpy(dst, i + peer * bytes, bytes); };
    }
    run(ctx, {0, n * out_count, kReduceScatter, dtype, op, -1}, msg, [&] {
      if (out_count == 0) return;
      const int me = ctx->gloo->rank;
      if (n == 1) {
        memcpy(out, in, bytes);
      } else if (inlined) {
        // Every peer sent us its chunk `me`; reduce them in rank order.
        auto chunk = [&](int r) -> const void* {
          return r == me ? i + me * bytes : inboxOf(ctx, r) + kHeader;
        };
        fn(out, chunk(0), chunk(1), out_count);
        for (int r = 2; r < static_cast<int>(n); r++) fn(out, out, chunk(r), out_count);
      } else {
        ringReduceScatter(ctx, out, in, out_count, dtrain::dtypeSize(dtype), fn);
      }
      if (op == DT_AVG) dtrain::divideInPlace(static_cast<float*>(out), out_count, n);
    });
  });
}

int dt_gloo_barrier(dt_gloo_ctx* ctx) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  // The first-message exchange is all-to-all: finishing it means every rank arrived.
  return dtrain::guard(ctx, [&] { run(ctx, {0, 0, kBarrier, -1, -1, -1}, {}, [] {}); });
}

}  // extern "C"
