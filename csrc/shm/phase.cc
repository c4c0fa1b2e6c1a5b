// The phase protocol under every shared-memory collective: arrive, wait for the peers (spinning
// briefly, then sleeping on a futex), and tell a slow peer from a dead, hung or failed one.
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "internal.h"

namespace dtrain::shm {

void recordFailure(dt_shm_ctx* ctx, int status, const std::string& message) {
  Header* h = ctx->header();
  int32_t none = -1;
  // The first failure wins; -2 marks the message as being written.
  if (h->failed.compare_exchange_strong(none, -2)) {
    h->failed_status = status;
    size_t n = std::min(message.size(), sizeof(h->failed_message) - 1);
    memcpy(h->failed_message, message.data(), n);
    h->failed_message[n] = '\0';
    h->failed.store(ctx->rank, std::memory_order_release);
  }
}

namespace {

// Spins before sleeping: a peer on another core usually arrives within microseconds, and a
// futex round trip costs more than that; on a loaded machine sleeping sooner is kinder.
constexpr int kSpins = 200;
// How long one futex sleep lasts before the failure checks run again.
constexpr long kSleepNs = 10'000'000;

inline bool reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void futexWait(std::atomic<uint32_t>* word, uint32_t seen) {
  timespec ts{0, kSleepNs};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool isDead(const dt_shm_ctx* ctx, int r) {
  if (ctx->pidfds[r] >= 0) {
    // A pidfd polls readable once its process has exited (zombie or reaped).
    pollfd p{ctx->pidfds[r], POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
  }
  return kill(ctx->pids[r], 0) != 0 && errno == ESRCH;
}

std::string rankList(const dt_shm_ctx* ctx, const std::vector<int>& ranks) {
  std::string list;
  for (size_t i = 0; i < ranks.size(); i++) {
    list += (i ? ", " : "") + std::to_string(ctx->global_ranks[ranks[i]]);
  }
  return (ranks.size() > 1 ? "ranks " : "rank ") + list;
}

// Breaks the group: records the failure in the segment so that peers waiting on us stop now
// rather than at their timeout, then throws it.
[[noreturn]] void breakGroup(dt_shm_ctx* ctx, dt_collective_status status,
                             const std::string& message) {
  ctx->broken = message;
  recordFailure(ctx, status, message);
  throw Failure(status, message);
}

// The checks between sleeps: another rank broke the group, a peer we wait for died, or time ran
// out. Names the ranks that have not arrived, as Gloo's first-message timeout does.
void checkPeers(dt_shm_ctx* ctx, const Fingerprint& fp, uint32_t target, bool first,
                std::chrono::steady_clock::time_point deadline) {
  Header* h = ctx->header();
  // Our own failures throw where they happen; one recorded by dt_shm_abort lands here too.
  int32_t failed = h->failed.load(std::memory_order_acquire);
  if (failed >= 0) {
    ctx->broken = h->failed_message;
    throw Failure(static_cast<dt_collective_status>(h->failed_status), h->failed_message);
  }
  std::vector<int> missing, dead;
  for (int r = 0; r < ctx->size; r++) {
    if (r == ctx->rank || reached(ctx->line(r)->arrive.load(std::memory_order_acquire), target)) {
      continue;
    }
    missing.push_back(r);
    if (isDead(ctx, r)) dead.push_back(r);
  }
  if (!dead.empty()) {
    breakGroup(ctx, DT_EPEER, opLabel(fp) + ": " + rankList(ctx, dead) + " died (process " +
                                  std::to_string(ctx->pids[dead[0]]) + " exited)");
  }
  if (!missing.empty() && std::chrono::steady_clock::now() >= deadline) {
    breakGroup(ctx, DT_ETIMEOUT, opLabel(fp) + ": timed out after " +
                                     std::to_string(ctx->timeout.count()) + " ms waiting for " +
                                     rankList(ctx, missing) +
                                     (first ? " to join" : " to reach the collective's next step"));
  }
}

void arrive(dt_shm_ctx* ctx) {
  RankLine* me = ctx->line(ctx->rank);
  me->arrive.store(++ctx->phase, std::memory_order_seq_cst);
  if (me->waiters.load(std::memory_order_seq_cst) != 0) futexWakeAll(&me->arrive);
}

void waitForAll(dt_shm_ctx* ctx, const Fingerprint& fp, bool first) {
  const uint32_t target = ctx->phase;
  const auto deadline = std::chrono::steady_clock::now() + ctx->timeout;
  for (int r = 0; r < ctx->size; r++) {
    if (r == ctx->rank) continue;
    RankLine* peer = ctx->line(r);
    for (int spins = 0; !reached(peer->arrive.load(std::memory_order_acquire), target);) {
      if (spins++ < kSpins) {
        cpuRelax();
        continue;
      }
      peer->waiters.fetch_add(1, std::memory_order_seq_cst);
      uint32_t seen = peer->arrive.load(std::memory_order_seq_cst);
      if (!reached(seen, target)) futexWait(&peer->arrive, seen);
      peer->waiters.fetch_sub(1, std::memory_order_seq_cst);
      checkPeers(ctx, fp, target, first, deadline);
    }
  }
}

}  // namespace

bool isPeerDead(const dt_shm_ctx* ctx, int r) { return isDead(ctx, r); }

void waitMapped(dt_shm_ctx* ctx) {
  Header* h = ctx->header();
  const auto deadline = std::chrono::steady_clock::now() + ctx->timeout;
  for (;;) {
    const uint32_t mapped = h->mapped.load(std::memory_order_acquire);
    if (mapped >= static_cast<uint32_t>(ctx->size)) return;
    std::vector<int> dead;
    for (int r = 0; r < ctx->size; r++) {
      if (r != ctx->rank && isDead(ctx, r)) dead.push_back(r);
    }
    if (!dead.empty()) {
      throw Failure(DT_EPEER, "shared-memory rendezvous: " + rankList(ctx, dead) +
                                  " died (process " + std::to_string(ctx->pids[dead[0]]) +
                                  " exited) before mapping " + ctx->name);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Failure(DT_ETIMEOUT, "shared-memory rendezvous: timed out after " +
                                     std::to_string(ctx->timeout.count()) + " ms with " +
                                     std::to_string(mapped) + " of " +
                                     std::to_string(ctx->size) + " ranks mapping " + ctx->name);
    }
    timespec ts{0, 1'000'000};  // the ranks map within milliseconds of each other
    nanosleep(&ts, nullptr);
  }
}

namespace {

std::string whereText(uint64_t where) {
  if (where == kPrivate) return "a buffer of its own";
  return "byte " + std::to_string(where & ((uint64_t(1) << 40) - 1)) + " of shared buffer #" +
         std::to_string(where >> 40);
}

}  // namespace

void backOffUntil(const std::function<bool()>& ready,
                  const std::function<void(std::chrono::steady_clock::time_point now)>& idle) {
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0; !ready(); spins++) {
    if (spins < kSpins) {
      cpuRelax();
      continue;
    }
    // Whoever holds what we wait for is running (or waiting for a core): give it ours first,
    // and sleep only once that has not been enough for a millisecond.
    const auto now = std::chrono::steady_clock::now();
    if (now - start < std::chrono::milliseconds(1)) {
      sched_yield();
      continue;
    }
    timespec ts{0, 50'000};
    nanosleep(&ts, nullptr);
    if (ready()) return;
    idle(now);
  }
}

void waitUntil(dt_shm_ctx* ctx, const Fingerprint& fp, const char* what,
               const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + ctx->timeout;
  // A peer that finished the last block may have exited or failed since: only an unfinished
  // collective is blamed on it (its writes precede its exit, so `ready` sees them).
  backOffUntil(ready, [&](std::chrono::steady_clock::time_point now) {
    if (int32_t failed = ctx->header()->failed.load(std::memory_order_acquire); failed >= 0) {
      ctx->broken = ctx->header()->failed_message;
      throw Failure(static_cast<dt_collective_status>(ctx->header()->failed_status),
                    ctx->header()->failed_message);
    }
    std::vector<int> dead;
    for (int r = 0; r < ctx->size; r++) {
      if (r != ctx->rank && isDead(ctx, r)) dead.push_back(r);
    }
    if (!dead.empty() && !ready()) {
      breakGroup(ctx, DT_EPEER, opLabel(fp) + ": " + rankList(ctx, dead) + " died (process " +
                                    std::to_string(ctx->pids[dead[0]]) + " exited)");
    }
    if (now >= deadline && !ready()) {
      breakGroup(ctx, DT_ETIMEOUT, opLabel(fp) + ": timed out after " +
                                       std::to_string(ctx->timeout.count()) + " ms waiting for " +
                                       what);
    }
  });
}

Fingerprint runPhases(dt_shm_ctx* ctx, Fingerprint fp, uint64_t stage_bytes,
                      const std::function<void(char* slot, size_t off, size_t len)>& fill,
                      const std::function<void(size_t off, size_t len, uint64_t chunk)>& consume,
                      uint64_t where) {
  if (!ctx->broken.empty()) {
    throw Failure(DT_EBROKEN, std::string(dt_collective_name(fp.kind)) +
                                  ": process group is unusable after an earlier failure: " +
                                  ctx->broken);
  }
  fp.seq = ++ctx->seq;
  const size_t slot = ctx->slot_bytes;
  const uint64_t chunks = std::max<uint64_t>(1, (stage_bytes + slot - 1) / slot);
  for (uint64_t c = 0; c < chunks; c++) {
    const size_t off = c * slot;
    const size_t len = std::min<uint64_t>(slot, stage_bytes - std::min(stage_bytes, off));
    const uint64_t chunk = ctx->chunk++;
    if (len > 0) fill(ctx->slot(ctx->rank, chunk), off, len);
    if (c == 0) {
      ctx->line(ctx->rank)->fp[chunk % 2] = fp;
      ctx->line(ctx->rank)->where[chunk % 2] = where;
    }
    arrive(ctx);
    waitForAll(ctx, fp, c == 0);
    if (c == 0 && ctx->size > 1) {
      std::vector<Fingerprint> all(ctx->size);
      for (int r = 0; r < ctx->size; r++) all[r] = ctx->line(r)->fp[chunk % 2];
      auto mismatch = mismatchMessage(ctx->global_ranks, all.data(), all.size());
      // Every rank arrived at this phase and throws the same error: the group stays usable.
      if (!mismatch.empty()) throw Failure(DT_EMISMATCH, mismatch);
      const uint64_t first = ctx->line(0)->where[chunk % 2];
      for (int r = 1; r < ctx->size; r++) {
        const uint64_t theirs = ctx->line(r)->where[chunk % 2];
        if (theirs == first) continue;
        throw Failure(DT_EMISMATCH, opLabel(fp) + ": " + ctx->rankName(r) + " passed " +
                                        whereText(theirs) + ", " + ctx->rankName(0) + " " +
                                        whereText(first) +
                                        " (a shared buffer is reduced in place only when every "
                                        "rank passes the same one)");
      }
    }
    if (len > 0) consume(off, len, chunk);
  }
  return fp;
}

}  // namespace dtrain::shm
