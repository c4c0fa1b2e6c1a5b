// Collectives on raw pointers. Each one first checks its fingerprint across ranks, then
// moves the payload with Gloo, and turns transport failures into errors that name the
// operation and the peer.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/types.h>
#include <string.h>

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
// Before moving any payload, every rank sends every other rank what it is about to do.
// Gloo matches messages by slot only, so ranks that disagree on the collective or its
// size would otherwise hang, read garbage, or abort inside Gloo's event loop. The exchange
// is all-to-all in one round, so it also doubles as the barrier, and every rank derives
// the same error message from the same table. It costs one small message latency.
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

void exchangeFingerprints(dt_gloo_ctx* ctx, const Fingerprint& mine) {
  auto& g = ctx->gloo;
  const int n = g->size;
  const int me = g->rank;
  std::vector<Fingerprint> all(n);
  all[me] = mine;
  Fingerprint out = mine;
  auto sendBuf = g->createUnboundBuffer(&out, sizeof(out));
  auto recvBuf = g->createUnboundBuffer(all.data(), all.size() * sizeof(Fingerprint));
  const uint64_t slot =
      gloo::Slot::build(kFingerprintSlotPrefix, static_cast<uint32_t>(mine.seq));
  std::vector<bool> arrived(n, false);
  arrived[me] = true;
  auto deadline = std::chrono::steady_clock::now() + ctx->timeout;
  try {
    for (int i = 0; i < n; i++) {
      if (i != me) recvBuf->recv(i, slot, i * sizeof(Fingerprint), sizeof(Fingerprint));
    }
    for (int i = 0; i < n; i++) {
      if (i != me) sendBuf->send(i, slot);
    }
    for (int k = 1; k < n; k++) {
      int src = -1;
      recvBuf->waitRecv(&src, remaining(deadline));
      if (src >= 0 && src < n) arrived[src] = true;
    }
    for (int k = 1; k < n; k++) sendBuf->waitSend(remaining(deadline));
  } catch (const gloo::IoException& e) {
    std::string detail = withoutLocation(e.what());
    if (detail.find("Timed out") == std::string::npos) transportFailure(ctx, mine, e);
    std::string late;
    for (int i = 0; i < n; i++) {
      if (!arrived[i]) late += (late.empty() ? "" : ", ") + std::to_string(ctx->jobRank(i));
    }
    auto message = opLabel(mine) + ": timed out after " + std::to_string(ctx->timeout.count()) +
                   " ms waiting for " + (late.find(',') == std::string::npos ? "rank " : "ranks ") +
                   late + " to join";
    abortWith(ctx, DT_ETIMEOUT, message);
  }
  auto mismatch = mismatchMessage(ctx, all);
  if (!mismatch.empty()) throw Failure(DT_EMISMATCH, mismatch);
}

// Checks the fingerprint, then runs `payload`; the single entry point of every collective.
void run(dt_gloo_ctx* ctx, Fingerprint fp, const std::function<void()>& payload) {
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
  exchangeFingerprints(ctx, fp);
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
  for (int s = 0; s < n - 1; s++) {
    const bool last = s == n - 2;
    auto& recvInto = last ? outBuf : scratchBuf[s % 2];
    recvInto->recv(left, slot, 0, bytes);
    if (s == 0) {
      inBuf->send(right, slot, (((r - 1) % n + n) % n) * bytes, bytes);
    } else {
      scratchBuf[(s - 1) % 2]->send(right, slot, 0, bytes);
    }
    recvInto->waitRecv(ctx->timeout);
    fn(recvInto->ptr, recvInto->ptr, chunkOf(r - s - 2), chunk);
    (s == 0 ? inBuf : scratchBuf[(s - 1) % 2])->waitSend(ctx->timeout);
  }
}

}  // namespace

extern "C" {

int dt_gloo_allreduce(dt_gloo_ctx* ctx, void* buf, uint64_t count, int dtype, int op) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return dtrain::guard(ctx, [&] {
    auto fn = checkReduce("allReduce", dtype, op);
    checkPointer("allReduce", buf, count);
    run(ctx, {0, count, kAllReduce, dtype, op, -1}, [&] {
      if (count == 0) return;
      if (ctx->gloo->size > 1) {
        gloo::AllreduceOptions opts(ctx->gloo);
        opts.setOutput(static_cast<Elem*>(buf), count);
        opts.setReduceFunction(fn);
        opts.setTag(static_cast<uint32_t>(ctx->seq));
        opts.setTimeout(ctx->timeout);
        gloo::allreduce(opts);
      }
      if (op == DT_AVG) dtrain::divideInPlace(static_cast<float*>(buf), count, ctx->gloo->size);
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
    run(ctx, {0, count, kBroadcast, dtype, -1, root}, [&] {
      if (count == 0 || ctx->gloo->size == 1) return;
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
    run(ctx, {0, count, kAllGather, dtype, -1, -1}, [&] {
      if (count == 0) return;
      const size_t bytes = count * dtrain::dtypeSize(dtype);
      std::vector<char> staging(nouts == 1 ? 0 : n * bytes);
      char* flat = nouts == 1 ? static_cast<char*>(outs[0]) : staging.data();
      if (n == 1) {
        memmove(flat, in, bytes);
      } else {
        gloo::AllgatherOptions opts(ctx->gloo);
        opts.setInput(const_cast<Elem*>(static_cast<const Elem*>(in)), count);
        opts.setOutput(reinterpret_cast<Elem*>(flat), n * count);
        opts.setTag(static_cast<uint32_t>(ctx->seq));
        opts.setTimeout(ctx->timeout);
        gloo::allgather(opts);
      }
      if (nouts != 1) {
        for (uint64_t i = 0; i < n; i++) memcpy(outs[i], flat + i * bytes, bytes);
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
    const size_t esize = dtrain::dtypeSize(dtype);
    auto o = static_cast<const char*>(out);
    auto i = static_cast<const char*>(in);
    if (out_count > 0 && o < i + n * out_count * esize && i < o + out_count * esize) {
      throw Failure(DT_EINVAL, "reduceScatter: output overlaps input");
    }
    run(ctx, {0, n * out_count, kReduceScatter, dtype, op, -1}, [&] {
      if (out_count == 0) return;
      if (n == 1) {
        memcpy(out, in, out_count * esize);
      } else {
        ringReduceScatter(ctx, out, in, out_count, esize, fn);
      }
      if (op == DT_AVG) dtrain::divideInPlace(static_cast<float*>(out), out_count, n);
    });
  });
}

int dt_gloo_barrier(dt_gloo_ctx* ctx) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  // The fingerprint exchange is all-to-all: finishing it means every rank arrived.
  return dtrain::guard(ctx, [&] { run(ctx, {0, 0, kBarrier, -1, -1, -1}, [] {}); });
}

}  // extern "C"
