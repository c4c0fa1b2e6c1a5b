// Point-to-point messages over Gloo's unbound buffers: the header with a small payload behind it,
// the verdict back, and only then a large payload, each on a slot of its own ([Note:
// point-to-point protocol] in p2p_message.h; the receives posted ahead, p2p_stage.h). An op runs
// without the context's call lock, so sends and receives run beside each other and beside a
// collective: their slots (prefixes 0x42..0x45) never meet the collectives' (0x01..0x41).
#include <gloo/common/error.h>

#include <memory>

#include "errors.h"
#include "internal.h"
#include "p2p_book.h"
#include "p2p_message.h"
#include "p2p_stage.h"

using namespace dtrain;
using dtrain::p2p::Header;

struct dt_gloo_p2p {
  // Owned, not borrowed from the context: an op may still run while its context is freed
  // (closing aborts it, and it returns on its own thread).
  std::shared_ptr<gloo::rendezvous::Context> gloo;
  std::shared_ptr<p2p::GlooBook> book;
  std::chrono::milliseconds timeout{0};
  int kind = p2p::kSend;
  int peer = 0;  // group rank
  int me_job = 0, peer_job = 0;
  uint64_t seq = 0;
  Header mine{}, theirs{};
  void* buf = nullptr;  // the tensor's bytes
  // A send's header, eager payload (empty when large) and verdict; a receive's verdict. Either
  // side's large payload, in place.
  std::unique_ptr<gloo::transport::UnboundBuffer> header, eager, verdict, payload;
  std::unique_ptr<p2p::Staged> staged;  // a receive's header and eager payload
  p2p::Finished finished;  // set when the run returned
  bool ran = false;  // a second run returns the first one's status
  int status = DT_OK;
  std::string error;
};

namespace {

using p2p::kEager;
using p2p::slotOf;

std::string label(const dt_gloo_p2p* op) {
  return p2p::opName(op->kind, op->peer_job, op->mine.tag);
}

// A Gloo exception as our error naming the peer: a timeout, or else a failed connection. Gloo
// throws the second both from a wait that was pending when the peer died and from posting a
// transfer on a pair that already saw it die (IoException "Connection closed by peer"): either
// way it is "peer", so that the group's diagnosis runs and names the dead rank.
[[noreturn]] void transportFailure(dt_gloo_p2p* op, const std::exception& e, const char* what) {
  auto detail = withoutLocation(e.what());
  std::string message;
  dt_collective_status status;
  if (detail.find("Timed out") != std::string::npos) {
    status = DT_ETIMEOUT;
    message = label(op) + ": timed out after " + std::to_string(op->timeout.count()) +
              " ms waiting for rank " + std::to_string(op->peer_job) + " " + what;
  } else {
    status = DT_EPEER;
    message = label(op) + ": connection to rank " + std::to_string(op->peer_job) +
              " failed (" + detail + ")";
  }
  op->book->breakWith(message);
  throw Failure(status, message);
}

// Waits for one transfer.
void await(dt_gloo_p2p* op, gloo::transport::UnboundBuffer* buf, bool recv, const char* what,
           std::chrono::steady_clock::time_point deadline) {
  bool done;
  try {
    done = recv ? buf->waitRecv(nullptr, remaining(deadline))
                : buf->waitSend(nullptr, remaining(deadline));
  } catch (const gloo::Exception& e) {
    transportFailure(op, e, what);
  }
  if (!done) {
    throw Failure(DT_EBROKEN, label(op) + ": the process group was destroyed while it ran");
  }
}

void runSend(dt_gloo_p2p* op, std::chrono::steady_clock::time_point deadline) {
  const int me = op->gloo->rank;
  op->verdict->recv(op->peer, slotOf(p2p::kVerdictSlot, op->peer, me, op->seq));
  op->header->send(op->peer, slotOf(p2p::kHeaderSlot, me, op->peer, op->seq));
  // Always sent, empty for a large payload: the receiver's staged receive takes it either way.
  op->eager->send(op->peer, slotOf(p2p::kEagerSlot, me, op->peer, op->seq));
  await(op, op->header.get(), false, "to post the matching recv", deadline);
  await(op, op->eager.get(), false, "to take the payload", deadline);
  await(op, op->verdict.get(), true, "to accept the message", deadline);
  if (!op->theirs.ok) {
    throw Failure(DT_EMISMATCH, p2p::mismatchMessage(op->me_job, op->peer_job, op->mine,
                                                     op->theirs));
  }
  if (op->payload) {
    op->payload->send(op->peer, slotOf(p2p::kPayloadSlot, me, op->peer, op->seq));
    await(op, op->payload.get(), false, "to take the payload", deadline);
  }
}

void runRecv(dt_gloo_p2p* op, std::chrono::steady_clock::time_point deadline) {
  const int me = op->gloo->rank;
  await(op, op->staged->head.get(), true, "to send", deadline);
  op->theirs = op->staged->header;
  op->mine.ok = p2p::sameMessage(op->theirs, op->mine) ? 1 : 0;
  // A large payload's receive is posted before the verdict goes, so that the payload goes out
  // the moment the verdict arrives instead of announcing itself first.
  const bool inPlace = op->mine.ok && op->theirs.nbytes > kEager;
  if (inPlace) op->payload->recv(op->peer, slotOf(p2p::kPayloadSlot, op->peer, me, op->seq));
  op->verdict->send(op->peer, slotOf(p2p::kVerdictSlot, me, op->peer, op->seq));
  await(op, op->staged->body.get(), true, "to send the payload", deadline);
  if (op->mine.ok && !inPlace && op->mine.nbytes > 0) {
    std::memcpy(op->buf, op->staged->data.get(), op->mine.nbytes);
  }
  op->book->recycle(std::move(op->staged->data));
  if (inPlace) await(op, op->payload.get(), true, "to send the payload", deadline);
  await(op, op->verdict.get(), false, "to read the verdict", deadline);
  if (!op->mine.ok) {
    throw Failure(DT_EMISMATCH, p2p::mismatchMessage(op->peer_job, op->me_job, op->theirs,
                                                     op->mine));
  }
}

int fail(dt_gloo_p2p* op, int status, const std::string& message) {
  op->status = status;
  op->error = message;
  return status;
}

// Runs `step`; false, with the op failed, when it threw.
template <typename F>
bool attempt(dt_gloo_p2p* op, F step) {
  try {
    step();
    return true;
  } catch (const Failure& e) {
    fail(op, e.status, e.what());
  } catch (const gloo::IoException& e) {
    // Thrown by posting a transfer on a pair already closed.
    try {
      transportFailure(op, e, "");
    } catch (const Failure& f) {
      fail(op, f.status, f.what());
    }
  } catch (const std::exception& e) {
    fail(op, DT_EINTERNAL, label(op) + ": " + withoutLocation(e.what()));
  }
  return false;
}

}  // namespace

namespace dtrain {

void closeP2P(dt_gloo_ctx* ctx) {
  if (ctx->p2p) ctx->p2p->close(ctx->timeout);
}

}  // namespace dtrain

extern "C" {

int dt_gloo_p2p_post(dt_gloo_ctx* ctx, int kind, int peer, void* buf, uint64_t count, int dtype,
                     uint32_t tag, const int64_t* dims, uint32_t ndim, dt_gloo_p2p** out) {
  if (ctx == nullptr || out == nullptr) return DT_EINVAL;
  *out = nullptr;
  return guard(ctx, [&] {
    const char* what = kind == p2p::kSend ? "send" : "recv";
    if (!ctx->gloo) throw Failure(DT_EINVAL, std::string(what) + ": context is not connected");
    const int size = ctx->gloo->size;
    if (kind != p2p::kSend && kind != p2p::kRecv) {
      throw Failure(DT_EINVAL, "p2p: unknown kind " + std::to_string(kind));
    }
    if (peer < 0 || peer >= size || peer == ctx->gloo->rank) {
      throw Failure(DT_EINVAL, std::string(what) + ": peer " + std::to_string(peer) +
                                   " is not another rank of a group of " + std::to_string(size));
    }
    const size_t elem = dtypeSize(dtype);
    if (elem == 0) throw Failure(DT_EINVAL, std::string(what) + ": unknown dtype code");
    if (buf == nullptr && count > 0) throw Failure(DT_EINVAL, std::string(what) + ": null buffer");
    if (!ctx->p2p) ctx->p2p = std::make_shared<p2p::GlooBook>(size, ctx->gloo);
    auto op = std::make_unique<dt_gloo_p2p>();
    op->gloo = ctx->gloo;
    op->book = std::static_pointer_cast<p2p::GlooBook>(ctx->p2p);
    op->timeout = ctx->timeout;
    op->kind = kind;
    op->peer = peer;
    op->me_job = ctx->jobRank(ctx->gloo->rank);
    op->peer_job = ctx->jobRank(peer);
    const uint64_t nbytes = count * elem;
    op->mine = p2p::makeHeader(dtype, tag, count, nbytes, dims, ndim);
    op->buf = buf;
    const bool send = kind == p2p::kSend;
    if (send) {
      op->header = ctx->gloo->createUnboundBuffer(&op->mine, sizeof(Header));
      op->eager = nbytes <= kEager ? ctx->gloo->createUnboundBuffer(buf, nbytes)
                                   : ctx->gloo->createUnboundBuffer(&op->mine, 0);
    }
    op->verdict = ctx->gloo->createUnboundBuffer(send ? &op->theirs : &op->mine, sizeof(Header));
    if (nbytes > kEager) op->payload = ctx->gloo->createUnboundBuffer(buf, nbytes);
    // Last: a post that failed takes no number, so the two sides' counts stay in step.
    op->seq = ctx->p2p->take(kind, peer);
    op->mine.seq = op->seq;
    *out = op.release();
  });
}

int dt_gloo_p2p_run(dt_gloo_p2p* op) {
  if (op == nullptr) return DT_EINVAL;
  if (op->ran) return op->status;
  op->ran = true;
  auto finish = [op] {
    op->finished.set();
    return op->status;
  };
  auto broken = op->book->broken();
  if (!broken.empty()) {
    fail(op, DT_EBROKEN, label(op) + ": point-to-point traffic is unusable after an " +
                             "earlier failure: " + broken);
    return finish();
  }
  // Taken before the op is registered, so that an abort from another thread sees it set.
  if (op->kind == p2p::kRecv &&
      !attempt(op, [op] { op->staged = op->book->take(op->peer, op->seq); })) {
    return finish();
  }
  auto abort = [op] {
    auto* staged = op->staged.get();
    for (auto* b : {op->header.get(), op->eager.get(), op->verdict.get(), op->payload.get(),
                    staged ? staged->head.get() : nullptr, staged ? staged->body.get() : nullptr}) {
      if (b == nullptr) continue;
      b->abortWaitRecv();
      b->abortWaitSend();
    }
  };
  if (!op->book->enter(op, abort)) {
    fail(op, DT_EBROKEN, label(op) + ": the process group was destroyed");
    return finish();
  }
  const auto deadline = std::chrono::steady_clock::now() + op->timeout;
  attempt(op, [&] { op->kind == p2p::kSend ? runSend(op, deadline) : runRecv(op, deadline); });
  op->book->leave(op);
  return finish();
}

int dt_gloo_p2p_wait(dt_gloo_p2p* op) {
  if (op == nullptr) return DT_EINVAL;
  op->finished.wait();
  return op->status;
}

int dt_gloo_p2p_error(dt_gloo_p2p* op, char* buf, size_t len) {
  if (op == nullptr) return 0;
  copyMessage(op->error, buf, len);
  return static_cast<int>(op->error.size());
}

int dt_gloo_p2p_free(dt_gloo_p2p* op) {
  delete op;
  return DT_OK;
}

}  // extern "C"
