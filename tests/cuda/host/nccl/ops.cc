/* The algorithms, over Gloo's unbound buffers, and the unit of work a stream runs (run_unit).
 *
 * [Note: units of work]
 * A unit is one call, or every call of a group (api.cc), run on the stream's thread. It posts the
 * transfers of all its calls before waiting for any, then finishes the calls in order, so a batch
 * of sends and receives to several peers cannot deadlock: Gloo moves the bytes of every posted
 * transfer on its own thread, whatever this one waits for. Every rank numbers its collectives in
 * the order it runs them and its messages per peer and direction, and that number is the Gloo slot
 * a transfer matches on, so the n-th message from rank a to rank b meets b's n-th receive from a.
 *
 * The reductions fold the ranks' inputs in rank order, so every rank computes the same bits: each
 * rank reduces the chunk it owns from every rank's copy, then sends the result to all (all-reduce),
 * or keeps it (reduce-scatter). Simple, not fast: the tests move kilobytes to megabytes.
 *
 * Waits are woken early by two things: ncclCommAbort (the work gives up, as NCCL's kernels do when
 * aborted), and the watchdog (comm.cc), when the peer's connection failed. */
#include <string.h>

#include <algorithm>

#include "standin.h"

namespace nccl_standin {

namespace {

using Clock = std::chrono::steady_clock;

const uint64_t kSeqMask = (1ull << 48) - 1;
uint64_t coll_slot(uint64_t seq, int phase) {
  return (0xC1ull << 56) | ((seq & kSeqMask) << 8) | static_cast<uint64_t>(phase);
}
uint64_t p2p_slot(uint64_t seq) { return (0xD2ull << 56) | ((seq & kSeqMask) << 8); }

char g_nothing; /* what a zero-byte transfer points at */

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

bool is_aborted(Comm *c) {
  std::lock_guard<std::mutex> lock(c->mu);
  return c->aborted;
}

/* One posted transfer, in its communicator's `live` list from construction to destruction (the
 * buffer goes after it left the list, so the abort and the watchdog never touch a freed one). */
class Link {
 public:
  Link(Comm *c, Core *core, void *ptr, size_t bytes, int peer, bool recv) : c_(c) {
    t_.buf = core->gloo->createUnboundBuffer(bytes > 0 ? ptr : &g_nothing, bytes);
    t_.peer = peer;
    t_.recv = recv;
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->aborted) throw Aborted();
    c->live.push_back(&t_);
  }
  ~Link() {
    std::lock_guard<std::mutex> lock(c_->mu);
    c_->live.erase(std::find(c_->live.begin(), c_->live.end(), &t_));
  }
  Link(const Link &) = delete;
  Link &operator=(const Link &) = delete;

  void post(uint64_t slot) {
    try {
      if (t_.recv) t_.buf->recv(t_.peer, slot); else t_.buf->send(t_.peer, slot);
    } catch (const std::exception &e) {
      throw Failure(classify(e.what()), about() + strip_location(e.what()));
    }
  }

  void wait(Clock::time_point deadline) {
    if (!wait_for(remaining(deadline))) {
      if (is_aborted(c_)) throw Aborted();
      /* The watchdog woke us: the peer's connection failed. The transfer finished before that or
       * never will, which a short wait tells; if it must time out, Gloo closes every connection
       * of the context, which this failure does anyway (run_unit). */
      bool finished = false;
      try {
        finished = wait_for(std::chrono::milliseconds(1));
      } catch (const std::exception &) {
      }
      if (!finished) {
        if (is_aborted(c_)) throw Aborted();
        std::lock_guard<std::mutex> lock(c_->mu);
        throw Failure(classify(t_.peer_error), about() + strip_location(t_.peer_error));
      }
    }
    std::lock_guard<std::mutex> lock(c_->mu);
    t_.done = true;
  }

 private:
  /* Gloo's exceptions (a failed connection, a timeout) become ours, naming the peer. */
  bool wait_for(std::chrono::milliseconds timeout) {
    try {
      return t_.recv ? t_.buf->waitRecv(nullptr, timeout) : t_.buf->waitSend(nullptr, timeout);
    } catch (const std::exception &e) {
      throw Failure(classify(e.what()), about() + strip_location(e.what()));
    }
  }
  std::string about() const {
    return std::string(t_.recv ? "receiving from" : "sending to") + " rank " +
           std::to_string(t_.peer) + ": ";
  }

  Comm *c_;
  Transfer t_;
};

struct Op {
  Call call;
  size_t es = 0; /* bytes per element */
  uint64_t seq = 0;
  std::vector<std::unique_ptr<Link>> links; /* the phase in flight */
  std::vector<std::vector<char>> staging; /* reductions: each peer's copy of our chunk */
};

class Runner {
 public:
  Runner(Comm *c, Core *core, const std::vector<Call> &calls)
      : c_(c), core_(core), me_(c->rank), n_(c->size), deadline_(Clock::now() + c->timeout) {
    for (const Call &call : calls) {
      Op op;
      op.call = call;
      op.es = dtype_size(call.dtype);
      ops_.push_back(std::move(op));
    }
  }

  void run() {
    for (Op &op : ops_) step(op, &Runner::post);
    for (Op &op : ops_) step(op, &Runner::middle);
    for (Op &op : ops_) step(op, &Runner::finish);
  }

  /* The call that failed, for the message. */
  std::string where() const {
    return std::string(current_) + " (rank " + std::to_string(me_) + " of " + std::to_string(n_) +
           ")";
  }

  /* Frees every transfer (run_unit does it once the connections are closed). */
  void release() {
    for (Op &op : ops_) op.links.clear();
  }

 private:
  void step(Op &op, void (Runner::*fn)(Op &)) {
    current_ = call_name(op.call.kind);
    (this->*fn)(op);
  }

  void link(Op &op, const void *ptr, size_t bytes, int peer, bool recv, uint64_t slot) {
    std::unique_ptr<Link> l(new Link(c_, core_, const_cast<void *>(ptr), bytes, peer, recv));
    op.links.push_back(std::move(l));
    op.links.back()->post(slot);
  }
  void wait_all(Op &op) {
    for (auto &l : op.links) l->wait(deadline_);
    op.links.clear();
  }

  /* The all-reduce's chunks: rank j owns elements [offset(j), offset(j) + length(j)). */
  size_t offset(size_t count, int j) const {
    return count / n_ * j + std::min<size_t>(j, count % n_);
  }
  size_t length(size_t count, int j) const { return count / n_ + (static_cast<size_t>(j) < count % n_); }

  /* Phase one: every transfer a call can post before it waits for any. */
  void post(Op &op) {
    const Call &k = op.call;
    char *recv = static_cast<char *>(k.recv);
    const char *send = static_cast<const char *>(k.send);
    if (k.kind == kSend || k.kind == kRecv) {
      uint64_t &seq = (k.kind == kSend ? core_->send_seq : core_->recv_seq)[k.peer];
      op.seq = seq++;
      link(op, k.kind == kSend ? send : recv, k.count * op.es, k.peer, k.kind == kRecv,
           p2p_slot(op.seq));
      return;
    }
    op.seq = core_->coll_seq++;
    const uint64_t slot = coll_slot(op.seq, 1);
    const size_t bytes = k.count * op.es;
    if (k.count == 0) return;
    switch (k.kind) {
      case kBroadcast:
        if (k.peer == me_) {
          if (recv != send) memmove(recv, send, bytes);
          for (int j = 0; j < n_; j++)
            if (j != me_) link(op, send, bytes, j, false, slot);
        } else {
          link(op, recv, bytes, k.peer, true, slot);
        }
        return;
      case kAllGather:
        if (recv + me_ * bytes != send) memmove(recv + me_ * bytes, send, bytes);
        for (int j = 0; j < n_; j++) {
          if (j == me_) continue;
          link(op, send, bytes, j, false, slot);
          link(op, recv + j * bytes, bytes, j, true, slot);
        }
        return;
      case kAllReduce:
      case kReduceScatter: {
        /* Rank j gets its chunk of our input; we get our chunk of everyone's. */
        const bool all = k.kind == kAllReduce;
        const size_t mine = (all ? length(k.count, me_) : k.count) * op.es;
        op.staging.resize(n_);
        for (int j = 0; j < n_; j++) {
          if (j == me_) continue;
          const size_t theirs = (all ? length(k.count, j) : k.count) * op.es;
          const size_t at = (all ? offset(k.count, j) : k.count * j) * op.es;
          if (theirs > 0) link(op, send + at, theirs, j, false, slot);
          op.staging[j].resize(mine);
          if (mine > 0) link(op, op.staging[j].data(), mine, j, true, slot);
        }
        return;
      }
      default:
        return;
    }
  }

  /* Waits for phase one; the reductions then fold our chunk, and the all-reduce posts phase two:
   * our reduced chunk to every rank, theirs from each. */
  void middle(Op &op) {
    wait_all(op);
    const Call &k = op.call;
    if (k.kind != kAllReduce && k.kind != kReduceScatter) return;
    if (k.count == 0) return;
    const bool all = k.kind == kAllReduce;
    const size_t elems = all ? length(k.count, me_) : k.count;
    const size_t at = (all ? offset(k.count, me_) : k.count * me_) * op.es;
    const char *own = static_cast<const char *>(k.send) + at;
    /* Into a scratch buffer: in place, the output overlaps our own input, read at step `me_`. */
    const char *first = me_ == 0 ? own : op.staging[0].data();
    std::vector<char> acc(first, first + elems * op.es);
    FoldFn fold = fold_fn(k.dtype, k.op);
    for (int r = 1; r < n_; r++) fold(acc.data(), r == me_ ? own : op.staging[r].data(), elems);
    if (k.op == ncclAvg) divide(acc.data(), elems, k.dtype, n_);
    char *out = static_cast<char *>(k.recv) + (all ? at : 0);
    if (!acc.empty()) memcpy(out, acc.data(), acc.size());
    op.staging.clear();
    if (!all) return;
    const uint64_t slot = coll_slot(op.seq, 2);
    for (int j = 0; j < n_; j++) {
      if (j == me_) continue;
      if (elems > 0) link(op, out, elems * op.es, j, false, slot);
      const size_t theirs = length(k.count, j) * op.es;
      if (theirs > 0)
        link(op, static_cast<char *>(k.recv) + offset(k.count, j) * op.es, theirs, j, true, slot);
    }
  }

  void finish(Op &op) { wait_all(op); }

  Comm *c_;
  Core *core_;
  int me_, n_;
  Clock::time_point deadline_;
  std::vector<Op> ops_;
  const char *current_ = "?";
};

/* Whether the unit may run: not once the communicator was aborted, and not after an earlier unit
 * failed, which NCCL's later kernels could not either (they would wait behind the stuck one). */
bool may_run(Comm *c) {
  std::unique_lock<std::mutex> lock(c->mu);
  if (c->async_error != ncclSuccess)
    c->aborted_cv.wait(lock, [c] { return c->aborted; });
  return !c->aborted;
}

}  // namespace

void run_unit(void *arg) {
  std::unique_ptr<Unit> unit(static_cast<Unit *>(arg));
  Comm *c = unit->comm;
  Core *core = unit->core.get();
  if (!may_run(c)) return;
  std::lock_guard<std::mutex> turn(core->op_mu);
  if (!may_run(c)) return;
  Runner runner(c, core, unit->calls);
  int result = ncclSystemError;
  std::string message;
  try {
    runner.run();
    return;
  } catch (const Aborted &) {
    /* Nothing may land in our buffers once they are freed: a silent peer could still send. */
    core->gloo->closeConnections();
    return;
  } catch (const Failure &e) {
    result = e.result;
    message = e.what();
  } catch (const std::exception &e) {
    result = classify(e.what());
    message = strip_location(e.what());
  }
  /* [Note: failed work blocks]
   * The error is the communicator's from here on; closing every connection tells the other ranks
   * at once (their transfers with us fail) rather than at their timeout. The work then waits for
   * ncclCommAbort, as a failed NCCL kernel spins until its communicator is aborted: returning now
   * would complete the stream's event, which dtrain reads as success. */
  record_failure(c, result, runner.where() + ": " + message);
  core->gloo->closeConnections();
  runner.release();
  block_until_aborted(c);
}

}  // namespace nccl_standin
