// Point-to-point messages over shared memory: one channel per ordered pair of ranks, a ring the
// sender fills and the receiver drains, carrying each message's header, then (once the receiver
// has written its verdict beside the ring) its payload ([Note: point-to-point protocol] in
// csrc/gloo/p2p_message.h). Ops on one channel run one at a time, in posting order; ops on
// different channels, and the collectives, run beside each other.

#include <algorithm>
#include <cstring>

#include "../gloo/p2p_book.h"
#include "../gloo/p2p_message.h"
#include "internal.h"

using dtrain::Failure;
using namespace dtrain::shm;
namespace p2p = dtrain::p2p;
using Message = dtrain::p2p::Header;

// The control page of a channel: written bytes (by the sender), read bytes and verdicts (by the
// receiver), each on its own cache line.
struct alignas(64) ChannelLine {
  std::atomic<uint64_t> value;
};
struct Channel {
  ChannelLine written, read, verdicts;
  Message verdict;  // the receiver's header for message verdicts - 1
};
static_assert(sizeof(Channel) <= kPage, "the channel's control fits its page");

namespace dtrain::shm {

// Per context: the message numbers, and the next number to run on each channel of this rank
// (an op waits for its turn there), in memory of this process only.
struct P2PLanes {
  explicit P2PLanes(int size) : book(size), turn{std::vector<std::atomic<uint64_t>>(size),
                                                  std::vector<std::atomic<uint64_t>>(size)} {}
  p2p::Book book;
  std::vector<std::atomic<uint64_t>> turn[2];
};

size_t closeP2P(dt_shm_ctx* ctx) {
  return ctx->p2p ? ctx->p2p->book.close(ctx->timeout) : 0;
}

}  // namespace dtrain::shm

struct dt_shm_p2p {
  dt_shm_ctx* ctx = nullptr;  // used only after entering the book, which closing refuses
  std::shared_ptr<P2PLanes> lanes;
  int kind = p2p::kSend;
  int peer = 0;
  uint64_t seq = 0;
  char* buf = nullptr;
  Message mine{};
  std::string label;  // "send to rank 3 (tag 0)", made at post: the context may be gone by the run
  p2p::Finished finished;  // set when the run returned
  bool ran = false;
  int status = DT_OK;
  std::string error;
};

namespace {

const std::string& label(const dt_shm_p2p* op) { return op->label; }

// Waits until `ready()` (backOffUntil), failing when the peer dies, the group broke, the context
// closes or the deadline passes.
void waitFor(dt_shm_p2p* op, const char* what, std::chrono::steady_clock::time_point deadline,
             const std::function<bool()>& ready) {
  backOffUntil(ready, [&](std::chrono::steady_clock::time_point now) {
    dt_shm_ctx* ctx = op->ctx;
    const auto peer = std::to_string(ctx->global_ranks[op->peer]);
    std::string message;
    dt_collective_status status = DT_OK;
    if (op->lanes->book.closing()) {
      throw Failure(DT_EBROKEN, label(op) + ": the process group was destroyed while it ran");
    } else if (isPeerDead(ctx, op->peer)) {
      status = DT_EPEER;
      message = label(op) + ": rank " + peer + " died (process " +
                std::to_string(ctx->pids[op->peer]) + " exited)";
    } else if (ctx->header()->failed.load(std::memory_order_acquire) >= 0) {
      status = DT_EBROKEN;
      message = label(op) + ": the group failed: " + ctx->header()->failed_message;
    } else if (now >= deadline) {
      status = DT_ETIMEOUT;
      message = label(op) + ": timed out after " + std::to_string(ctx->timeout.count()) +
                " ms waiting for rank " + peer + " " + what;
    }
    if (status != DT_OK) {
      op->lanes->book.breakWith(message);
      throw Failure(status, message);
    }
  });
}

// Streams `bytes` from `src` into the ring of channel `ch`.
void put(dt_shm_p2p* op, char* ch, const char* src, size_t bytes, const char* what,
         std::chrono::steady_clock::time_point deadline) {
  auto* c = reinterpret_cast<Channel*>(ch);
  char* ring = ch + kPage;
  const size_t cap = ringBytes(op->ctx->size);
  uint64_t at = c->written.value.load(std::memory_order_relaxed);
  for (size_t done = 0; done < bytes;) {
    uint64_t space = 0;
    waitFor(op, what, deadline, [&] {
      space = cap - (at - c->read.value.load(std::memory_order_acquire));
      return space > 0;
    });
    const size_t off = at % cap;
    const size_t n = std::min<size_t>({bytes - done, space, cap - off});
    memcpy(ring + off, src + done, n);
    done += n;
    at += n;
    c->written.value.store(at, std::memory_order_release);
  }
}

// Drains `bytes` from the ring of channel `ch` into `dst`.
void take(dt_shm_p2p* op, char* ch, char* dst, size_t bytes, const char* what,
          std::chrono::steady_clock::time_point deadline) {
  auto* c = reinterpret_cast<Channel*>(ch);
  const char* ring = ch + kPage;
  const size_t cap = ringBytes(op->ctx->size);
  uint64_t at = c->read.value.load(std::memory_order_relaxed);
  for (size_t done = 0; done < bytes;) {
    uint64_t avail = 0;
    waitFor(op, what, deadline, [&] {
      avail = c->written.value.load(std::memory_order_acquire) - at;
      return avail > 0;
    });
    const size_t off = at % cap;
    const size_t n = std::min<size_t>({bytes - done, avail, cap - off});
    memcpy(dst + done, ring + off, n);
    done += n;
    at += n;
    c->read.value.store(at, std::memory_order_release);
  }
}

void runSend(dt_shm_p2p* op, std::chrono::steady_clock::time_point deadline) {
  dt_shm_ctx* ctx = op->ctx;
  char* ch = ctx->channel(ctx->rank, op->peer);
  auto* c = reinterpret_cast<Channel*>(ch);
  put(op, ch, reinterpret_cast<const char*>(&op->mine), sizeof(Message),
      "to post the matching recv", deadline);
  waitFor(op, "to post the matching recv", deadline, [&] {
    return c->verdicts.value.load(std::memory_order_acquire) > op->seq;
  });
  const Message theirs = c->verdict;
  if (!theirs.ok) {
    throw Failure(DT_EMISMATCH, p2p::mismatchMessage(ctx->global_ranks[ctx->rank],
                                                     ctx->global_ranks[op->peer], op->mine,
                                                     theirs));
  }
  put(op, ch, op->buf, op->mine.nbytes, "to take the payload", deadline);
}

void runRecv(dt_shm_p2p* op, std::chrono::steady_clock::time_point deadline) {
  dt_shm_ctx* ctx = op->ctx;
  char* ch = ctx->channel(op->peer, ctx->rank);
  auto* c = reinterpret_cast<Channel*>(ch);
  Message theirs{};
  take(op, ch, reinterpret_cast<char*>(&theirs), sizeof(Message), "to send", deadline);
  op->mine.ok = p2p::sameMessage(theirs, op->mine) ? 1 : 0;
  c->verdict = op->mine;
  c->verdicts.value.store(op->seq + 1, std::memory_order_release);
  if (!op->mine.ok) {
    throw Failure(DT_EMISMATCH, p2p::mismatchMessage(ctx->global_ranks[op->peer],
                                                     ctx->global_ranks[ctx->rank], theirs,
                                                     op->mine));
  }
  take(op, ch, op->buf, op->mine.nbytes, "to send the payload", deadline);
}

int fail(dt_shm_p2p* op, int status, const std::string& message) {
  op->status = status;
  op->error = message;
  return status;
}

}  // namespace

extern "C" {

int dt_shm_p2p_post(dt_shm_ctx* ctx, int kind, int peer, void* buf, uint64_t count, int dtype,
                    uint32_t tag, const int64_t* dims, uint32_t ndim, dt_shm_p2p** out) {
  if (ctx == nullptr || out == nullptr || ctx->base == nullptr) return DT_EINVAL;
  *out = nullptr;
  const char* what = kind == p2p::kSend ? "send" : "recv";
  std::string message;
  if (kind != p2p::kSend && kind != p2p::kRecv) {
    message = "p2p: unknown kind " + std::to_string(kind);
  } else if (peer < 0 || peer >= ctx->size || peer == ctx->rank) {
    message = std::string(what) + ": peer " + std::to_string(peer) +
              " is not another rank of a group of " + std::to_string(ctx->size);
  } else if (dtrain::dtypeSize(dtype) == 0) {
    message = std::string(what) + ": unknown dtype code " + std::to_string(dtype);
  } else if (buf == nullptr && count > 0) {
    message = std::string(what) + ": null buffer";
  }
  if (!message.empty()) {
    std::lock_guard<std::mutex> lock(ctx->error_mu);
    ctx->error = message;
    return DT_EINVAL;
  }
  try {
    if (!ctx->p2p) ctx->p2p = std::make_shared<P2PLanes>(ctx->size);
    auto op = std::make_unique<dt_shm_p2p>();
    op->ctx = ctx;
    op->lanes = ctx->p2p;
    op->kind = kind;
    op->peer = peer;
    op->buf = static_cast<char*>(buf);
    op->mine = p2p::makeHeader(dtype, tag, count, count * dtrain::dtypeSize(dtype), dims, ndim);
    op->label = p2p::opName(kind, ctx->global_ranks[peer], tag);
    op->seq = ctx->p2p->book.take(kind, peer);
    op->mine.seq = op->seq;
    *out = op.release();
    return DT_OK;
  } catch (const std::bad_alloc&) {
    std::lock_guard<std::mutex> lock(ctx->error_mu);
    ctx->error = std::string(what) + ": out of memory";
    return DT_EINTERNAL;
  }
}

int dt_shm_p2p_run(dt_shm_p2p* op) {
  if (op == nullptr) return DT_EINVAL;
  if (op->ran) return op->status;
  op->ran = true;
  auto& book = op->lanes->book;
  if (!book.enter(op, [] {})) {
    fail(op, DT_EBROKEN, label(op) + ": the process group was destroyed");
    op->finished.set();
    return op->status;
  }
  const auto deadline = std::chrono::steady_clock::now() + op->ctx->timeout;
  auto& turn = op->lanes->turn[op->kind][op->peer];
  try {
    auto broken = book.broken();
    if (!broken.empty()) {
      throw Failure(DT_EBROKEN, label(op) + ": point-to-point traffic is unusable after an " +
                                    "earlier failure: " + broken);
    }
    // The channel runs its messages in posting order: wait for the ones posted before.
    waitFor(op, "to finish the messages posted before it", deadline,
            [&] { return turn.load(std::memory_order_acquire) == op->seq; });
    try {
      op->kind == p2p::kSend ? runSend(op, deadline) : runRecv(op, deadline);
    } catch (...) {
      turn.fetch_add(1, std::memory_order_release);
      throw;
    }
    turn.fetch_add(1, std::memory_order_release);
  } catch (const Failure& e) {
    fail(op, e.status, e.what());
  } catch (const std::exception& e) {
    fail(op, DT_EINTERNAL, label(op) + ": " + e.what());
  }
  book.leave(op);
  op->finished.set();
  return op->status;
}

int dt_shm_p2p_wait(dt_shm_p2p* op) {
  if (op == nullptr) return DT_EINVAL;
  op->finished.wait();
  return op->status;
}

int dt_shm_p2p_error(dt_shm_p2p* op, char* buf, size_t len) {
  if (op == nullptr) return 0;
  dtrain::copyMessage(op->error, buf, len);
  return static_cast<int>(op->error.size());
}

int dt_shm_p2p_free(dt_shm_p2p* op) {
  delete op;
  return DT_OK;
}

}  // extern "C"
