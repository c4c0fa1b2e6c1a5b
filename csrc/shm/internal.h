// Shared between the shared-memory transport's files: the segment layout, the context behind
// dt_shm_ctx, and the phase protocol (phase.cc) every collective is built from.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../gloo/fingerprint.h"
#include "dtrain_shm.h"

namespace dtrain::shm {

// [Note: shared-memory segment]
// One segment per group, laid out as a header page, one control line per rank, then two
// staging slots per rank. A collective is a series of phases, one per slot-sized chunk: each
// rank copies its chunk into its own slot, raises its `arrive` counter, waits for every other
// counter, then reads the peers' slots in place (reducing in rank order, so every rank computes
// bitwise the same result). Chunk k uses slot k % 2, and a rank fills chunk k only after every
// rank arrived at chunk k-1, which each does only after reading chunk k-2: two slots are enough
// and each chunk costs one synchronisation. The first phase of a collective also carries its
// fingerprint ([Note: fingerprint] in csrc/gloo/fingerprint.cc), checked before any slot is read.
constexpr uint64_t kMagic = 0x6d68732d6e696174ULL;  // "tain-shm"
constexpr size_t kPage = 4096;

struct Header {
  uint64_t magic;
  uint32_t size;
  std::atomic<uint32_t> mapped;        // ranks that mapped the segment
  std::atomic<int32_t> failed;         // group rank that failed first and broke the group, or -1
  int32_t failed_status;               // its dt_collective_status
  char failed_message[1024];           // its message, read by ranks that were waiting on it
};
static_assert(sizeof(Header) <= kPage, "the header fits its page");

struct alignas(64) RankLine {
  std::atomic<uint32_t> arrive;   // phases this rank has arrived at; futex word
  std::atomic<uint32_t> waiters;  // peers sleeping on `arrive`, so arriving wakes only if needed
  // The fingerprint of the collective whose first chunk is k, at fp[k % 2]: like the slots, a
  // rank rewrites it only once every peer has read it.
  Fingerprint fp[2];
  // Beside fp[k % 2]: the shared buffer and offset the collective works on in place
  // (whereShared), or kPrivate for a buffer of the rank's own.
  uint64_t where[2];
};
static_assert(sizeof(RankLine) == 128, "two cache lines per rank");

// [Note: shared buffers]
// A buffer from dt_shm_buffer_alloc is one segment of its own with a part per rank, mapped by
// every rank: rank r's tensor is part r. An all-reduce on such a tensor needs no staging: once
// every rank has arrived, the ranks take blocks from one counter in the segment until none is
// left, reduce each from every part (in rank order, through a cache-sized buffer) and write it
// into every part; a rank returns once the count of finished blocks is full, when every part
// holds the whole result. Each byte is read once and written once per rank, against a copy into
// the slot, a read of every slot and a write for the staged path: 2.2-3.7x the bandwidth from 1
// to 64 MiB (BENCHMARKS.md). Taking blocks rather than a fixed slice per rank means a rank whose
// thread is slow to wake holds nobody up. Like the group's segment, a buffer has no name
// ([Note: unnamed segments] in segment.cc): rank 0 creates it and tells the others, through the
// group's segment, which descriptor to open; its label (rank 0's label plus an id every rank
// assigns in the same order, allocation being collective) only names it in messages.
//
// The first page of a shared buffer's segment. Blocks of an in-place all-reduce are claimed and
// counted in words tagged with the collective's sequence number, so that a word left by an
// earlier collective on the buffer reads as zero without anyone resetting it.
struct SharedHeader {
  alignas(64) std::atomic<uint64_t> claim;   // (tag << 32) | the next block to reduce
  alignas(64) std::atomic<uint64_t> done;    // (tag << 32) | blocks reduced and written back
};
static_assert(sizeof(SharedHeader) <= kPage, "the shared header fits its page");

struct SharedBuffer {
  uint32_t id = 0;
  char* base = nullptr;  // the SharedHeader's page, then the parts
  size_t stride = 0;     // bytes per part, a whole number of pages
  size_t bytes = 0;      // bytes asked for per part
  size_t map_bytes = 0;
  char* part(int r) const { return base + kPage + r * stride; }
  SharedHeader* header() const { return reinterpret_cast<SharedHeader*>(base); }
  ~SharedBuffer();
};

// Below this, an all-reduce on a shared buffer stages anyway (see dt_shm_allreduce).
constexpr size_t kInPlaceMinBytes = 512 * 1024;

// What RankLine::where says for a buffer outside every shared buffer.
constexpr uint64_t kPrivate = ~uint64_t(0);
// Offsets up to 2^40 bytes; ids below kMaxSharedBuffers, so that none aliases kPrivate.
constexpr uint32_t kMaxSharedBuffers = (1u << 24) - 1;
inline uint64_t whereShared(uint32_t id, uint64_t offset) {
  return (static_cast<uint64_t>(id) << 40) | offset;
}

inline size_t controlBytes(int size) {
  return (sizeof(RankLine) * size + kPage - 1) / kPage * kPage;
}
// Point-to-point messages (p2p.cc) go through one channel per ordered pair of ranks, after the
// staging slots: a control page, then a ring that the sender fills and the receiver drains
// ([Note: point-to-point protocol] in csrc/gloo/p2p_message.h). Rings shrink on hosts of many
// ranks (the channels grow with the square of the size): 64 KiB up to 16 ranks, 4 KiB from 256.
inline size_t ringBytes(int size) {
  const size_t fair = (size_t(1) << 20) / (size > 0 ? size : 1) / kPage * kPage;
  return fair > 64 * 1024 ? 64 * 1024 : fair < kPage ? kPage : fair;
}
inline size_t channelBytes(int size) { return kPage + ringBytes(size); }
inline size_t segmentBytes(int size, size_t slot_bytes) {
  return kPage + controlBytes(size) + 2 * slot_bytes * size +
         static_cast<size_t>(size) * size * channelBytes(size);
}

// Waits (up to the timeout) for the point-to-point ops still running on the context, which
// closing aborts (p2p.cc); returns how many still run.
struct P2PLanes;
size_t closeP2P(dt_shm_ctx* ctx);

}  // namespace dtrain::shm

struct dt_shm_ctx {
  std::mutex error_mu;
  std::string error;

  // The issue queue: ticket `serving` runs, later ones wait their turn.
  std::mutex queue_mu;
  std::condition_variable queue_cv;
  uint64_t next_ticket = 0;
  uint64_t serving = 0;

  std::string name;   // the segment's label, for messages: it has no name in /dev/shm
  int fd = -1;        // the creator's descriptor of the segment, open until every rank mapped it
  std::string share;  // the creator's "<descriptor>:<inode>", for the others to open it
  char* base = nullptr;
  size_t bytes = 0;
  size_t slot_bytes = 0;  // one staging slot: the chunk every phase moves
  int rank = 0;
  int size = 0;
  std::vector<int> global_ranks;
  std::vector<int> pids;
  std::vector<int> pidfds;  // -1 where pidfd_open is unavailable: kill(pid, 0) instead
  std::chrono::milliseconds timeout{0};

  uint32_t phase = 0;   // phases this rank arrived at
  uint64_t chunk = 0;   // chunks staged so far, picks the slot
  uint64_t seq = 0;     // collectives issued; the fingerprint's "op #N"
  std::string broken;   // set after a failure that leaves peers at different phases

  // Shared buffers allocated on this context, for the in-place collectives to find; each lives
  // while its handle (dt_shm_buffer) does, even past the context.
  std::mutex buffers_mu;
  std::vector<std::weak_ptr<dtrain::shm::SharedBuffer>> buffers;
  uint32_t next_buffer = 0;

  // Point-to-point messages (p2p.cc): numbered per peer, shared with the ops still running.
  std::shared_ptr<dtrain::shm::P2PLanes> p2p;

  dtrain::shm::Header* header() const { return reinterpret_cast<dtrain::shm::Header*>(base); }
  dtrain::shm::RankLine* line(int r) const {
    return reinterpret_cast<dtrain::shm::RankLine*>(base + dtrain::shm::kPage) + r;
  }
  char* slot(int r, uint64_t chunk_no) const {
    return base + dtrain::shm::kPage + dtrain::shm::controlBytes(size) +
           (2 * static_cast<size_t>(r) + chunk_no % 2) * slot_bytes;
  }
  // The point-to-point channel of messages from group rank `from` to group rank `to`.
  char* channel(int from, int to) const {
    return base + dtrain::shm::kPage + dtrain::shm::controlBytes(size) +
           2 * static_cast<size_t>(size) * slot_bytes +
           (static_cast<size_t>(from) * size + to) * dtrain::shm::channelBytes(size);
  }
  std::string rankName(int i) const {
    return "rank " + std::to_string(i >= 0 && i < static_cast<int>(global_ranks.size())
                                        ? global_ranks[i]
                                        : i);
  }
};

namespace dtrain::shm {

// A file descriptor closed when it goes out of scope, unless released (fd = -1) first.
struct Descriptor {
  int fd = -1;
  ~Descriptor();
};

// Creates an unnamed segment of `bytes` in /dev/shm, reserves its pages and maps it
// ([Note: unnamed segments] in segment.cc). `*fd` receives the descriptor to keep open until
// every rank has mapped it, `*share` what they pass to openShared; `label` names it in messages.
char* createShared(const std::string& label, size_t bytes, int* fd, std::string* share);

// Maps the segment that process `pid` created, given its `share`; `hint` ends the message for
// a segment of the wrong size.
char* openShared(const std::string& label, int pid, const std::string& share, size_t bytes,
                 const char* hint);

// Records `message` as the group's failure (the first one wins): every rank waiting in a
// collective, or entering one, fails with it instead of waiting for its timeout.
void recordFailure(dt_shm_ctx* ctx, int status, const std::string& message);

// Runs `body` in the turn of `ticket`, turning exceptions into a status and the error message
// (on the context, and in `error` when given: a started collective keeps its own).
int serve(dt_shm_ctx* ctx, uint64_t ticket, double* timing, const std::function<void()>& body,
          std::string* error = nullptr);

// [Note: blocking collectives]
// A collective called on the JavaScript thread must never wait for a ticket that only a later
// event-loop turn would serve: that turn cannot come while the thread is blocked. So it takes no
// ticket until every ticket issued before it has been served (the collectives on worker threads,
// and a started one, end without the event loop), then takes the next ticket itself and runs at
// once. If the queue stands still for a whole timeout, something issued a ticket and never ran
// it: the call fails with DT_ETIMEOUT saying so rather than hanging.
int serveWhenIdle(dt_shm_ctx* ctx, const char* what, const std::function<void()>& body,
                  double* timing = nullptr);

// The all-reduce itself (collectives.cc), shared by its queued and blocking forms.
void allReduce(dt_shm_ctx* ctx, void* buf, uint64_t count, int dtype, int op);

// out = src(0) op src(1) op ... over `bytes`, in rank order so that every rank computes the same
// bits, then divided by the group size for DT_AVG: the reduction of every staged and in-place
// collective (collectives.cc). `src(r)` is where rank r's bytes are.
void reduceInRankOrder(dt_shm_ctx* ctx, ReduceFn fn, int op, char* out, size_t bytes, int dtype,
                       const std::function<const char*(int)>& src);

// The broadcast itself (collectives.cc), shared by its queued and blocking forms.
void broadcast(dt_shm_ctx* ctx, void* buf, uint64_t count, int dtype, int root);

// The all-gather itself (collectives.cc), shared by its queued, blocking and started forms.
void allGather(dt_shm_ctx* ctx, const void* in, uint64_t count, int dtype, void* const* outs,
               uint64_t nouts);

// The reduce-scatter itself (collectives.cc), shared by its queued and blocking forms.
void reduceScatter(dt_shm_ctx* ctx, void* out, const void* in, uint64_t out_count, int dtype,
                   int op);

// Whether group rank `r`'s process has exited.
bool isPeerDead(const dt_shm_ctx* ctx, int r);

// Waits until every rank has mapped the segment, naming a rank that died first, or timing out.
void waitMapped(dt_shm_ctx* ctx);

// One collective: `stage_bytes` staged by every rank in slot-sized chunks; `fill(slot, off, len)`
// writes this rank's bytes [off, off+len) into its slot, `consume(off, len, chunk)` reads every
// rank's slot (ctx->slot(r, chunk)) once all arrived. Checks the fingerprint on the first phase.
// `where` is what the collective works on (kPrivate, or whereShared), checked with the fingerprint.
// Returns the fingerprint as sent (with its sequence number).
Fingerprint runPhases(dt_shm_ctx* ctx, Fingerprint fp, uint64_t stage_bytes,
                      const std::function<void(char* slot, size_t off, size_t len)>& fill,
                      const std::function<void(size_t off, size_t len, uint64_t chunk)>& consume,
                      uint64_t where = kPrivate);

// Waits until `ready()` holds: spinning, then yielding the core for a millisecond, then sleeping
// 50 µs at a time, with `idle(now)` after each sleep that left it unready (it throws to give up).
// The one back-off of a collective's wait (waitUntil) and a point-to-point message's (p2p.cc).
void backOffUntil(const std::function<bool()>& ready,
                  const std::function<void(std::chrono::steady_clock::time_point now)>& idle);

// Waits inside a collective until `ready()` holds (backOffUntil), failing the group when a rank
// dies or the timeout passes (`what` says what was awaited).
void waitUntil(dt_shm_ctx* ctx, const Fingerprint& fp, const char* what,
               const std::function<bool()>& ready);

// The shared buffer holding this rank's [p, p + bytes), and p's offset in its part, if any.
std::shared_ptr<SharedBuffer> findShared(dt_shm_ctx* ctx, const void* p, size_t bytes,
                                         size_t* offset);

// The all-reduce of [Note: shared buffers] on `bytes` at `offset` of every part of `buffer`.
void allReduceShared(dt_shm_ctx* ctx, const SharedBuffer& buffer, size_t offset, uint64_t count,
                     int dtype, int op, ReduceFn fn);

}  // namespace dtrain::shm
