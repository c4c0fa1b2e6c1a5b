// Shared buffers ([Note: shared buffers] in internal.h): their collective allocation, and the
// all-reduce that works on them in place.
#include <string.h>
#include <sys/mman.h>

#include <algorithm>
#include <new>

#include "internal.h"

using namespace dtrain;
using namespace dtrain::shm;

struct dt_shm_buffer {
  std::shared_ptr<SharedBuffer> buffer;
  char* data = nullptr;  // this rank's part
};

namespace dtrain::shm {

SharedBuffer::~SharedBuffer() {
  if (base != nullptr) munmap(base, map_bytes);
}

std::shared_ptr<SharedBuffer> findShared(dt_shm_ctx* ctx, const void* p, size_t bytes,
                                         size_t* offset) {
  std::lock_guard<std::mutex> lock(ctx->buffers_mu);
  auto at = reinterpret_cast<uintptr_t>(p);
  for (const auto& weak : ctx->buffers) {
    auto buffer = weak.lock();
    if (!buffer) continue;
    auto mine = reinterpret_cast<uintptr_t>(buffer->part(ctx->rank));
    if (at >= mine && at + bytes <= mine + buffer->bytes) {
      *offset = at - mine;
      return buffer;
    }
  }
  return nullptr;
}

void allReduceShared(dt_shm_ctx* ctx, const SharedBuffer& buffer, size_t offset, uint64_t count,
                     int dtype, int op, ReduceFn fn) {
  const size_t elem = dtypeSize(dtype);
  const Fingerprint fp = runPhases(ctx, {0, count, DT_ALLREDUCE, dtype, op, -1}, 0, nullptr,
                                   nullptr, whereShared(buffer.id, offset));
  // Every part is complete. The ranks take blocks from one counter until none is left, so that a
  // rank whose thread is slow to get a core (or to wake) holds nobody up: the others reduce its
  // share. Each block is reduced by one rank, in rank order, so every part gets the same bits.
  std::vector<char*> parts(ctx->size);
  for (int r = 0; r < ctx->size; r++) parts[r] = buffer.part(r) + offset;
  // A block stays in L1 between the reduction and its copies into every part; 16 KiB keeps the
  // blocks in whole cache lines when the tensor starts on one (DDP's buckets do).
  alignas(64) static thread_local char block[16384];
  const uint64_t step = sizeof(block) / elem;
  // Claimed a few blocks at a time: about 16 claims per rank, so that the claim and done counters
  // (one cache line each, which every claim moves between cores) cost little even at 64 MiB.
  const uint64_t unit = std::max<uint64_t>(1, (count + step - 1) / step / (16 * ctx->size)) * step;
  const uint64_t blocks = (count + unit - 1) / unit;
  const uint64_t tag = static_cast<uint32_t>(fp.seq);
  auto ofTag = [&](uint64_t word) { return (word >> 32) == tag ? word & 0xffffffffu : 0; };
  SharedHeader* h = buffer.header();
  for (;;) {
    uint64_t word = h->claim.load(std::memory_order_acquire);
    const uint64_t next = ofTag(word);
    if (next >= blocks) break;
    if (!h->claim.compare_exchange_weak(word, (tag << 32) | (next + 1),
                                        std::memory_order_acq_rel)) {
      continue;
    }
    const uint64_t end = std::min<uint64_t>(count, (next + 1) * unit);
    for (uint64_t i = next * unit; i < end; i += step) {
      const size_t n = std::min<uint64_t>(step, end - i);
      const size_t at = i * elem;
      reduceInRankOrder(ctx, fn, op, block, n * elem, dtype, [&](int r) { return parts[r] + at; });
      for (int r = 0; r < ctx->size; r++) memcpy(parts[r] + at, block, n * elem);
    }
    for (uint64_t d = h->done.load(std::memory_order_relaxed);
         !h->done.compare_exchange_weak(d, (tag << 32) | (ofTag(d) + 1),
                                        std::memory_order_acq_rel);) {
    }
  }
  // Every block is in every part once the count is full; no rank reads or writes a part after
  // that, so the parts are their owners' again. (The next collective on the buffer cannot start
  // before every rank arrives at it, which each does after leaving this one.)
  waitUntil(ctx, fp, "the ranks still reducing blocks of the shared buffer",
            [&] { return ofTag(h->done.load(std::memory_order_acquire)) == blocks; });
}

}  // namespace dtrain::shm

namespace {

// Every rank learns whether every rank succeeded: a rank's failure message travels in its slot,
// and every rank throws the first one (the group stays usable, each rank having arrived). Rank
// 0's `share` travels beside its message; every rank returns it.
std::string agree(dt_shm_ctx* ctx, const Fingerprint& fp, const std::string& mine,
                  const std::string& share = "") {
  constexpr size_t kMessage = 768, kShare = 256;
  std::string theirs;
  runPhases(
      ctx, fp, kMessage + kShare,
      [&](char* slot, size_t, size_t) {
        const size_t n = std::min(mine.size(), kMessage - 1);
        memcpy(slot, mine.data(), n);
        slot[n] = '\0';
        const size_t m = std::min(share.size(), kShare - 1);
        memcpy(slot + kMessage, share.data(), m);
        slot[kMessage + m] = '\0';
      },
      [&](size_t, size_t, uint64_t chunk) {
        for (int r = 0; r < ctx->size; r++) {
          const char* message = ctx->slot(r, chunk);
          if (message[0] != '\0') {
            throw Failure(DT_EINTERNAL,
                          "emptyShared: " + ctx->rankName(r) + " failed: " + message);
          }
        }
        theirs = ctx->slot(0, chunk) + kMessage;
      });
  return theirs;
}
}  // namespace

extern "C" {

int dt_shm_buffer_alloc(dt_shm_ctx* ctx, uint64_t ticket, uint64_t count, int dtype,
                        dt_shm_buffer** out, double* timing) {
  if (ctx == nullptr || out == nullptr) return DT_EINVAL;
  *out = nullptr;
  return serve(ctx, ticket, timing, [&] {
    // A rank's bad arguments travel through `agree`, so that every rank fails with them at once
    // rather than its peers waiting for it until their timeout.
    std::string error;
    const size_t elem = dtypeSize(dtype);
    if (elem == 0) {
      error = "unknown dtype code " + std::to_string(dtype);
    } else if (count > (uint64_t(1) << 40) / elem) {
      error = "a part of " + std::to_string(count) + " elements is over 2^40 bytes";
    } else if (ctx->next_buffer >= kMaxSharedBuffers) {
      error = "this group has made " + std::to_string(ctx->next_buffer) + " shared buffers, " +
              "the most one group can";
    }
    auto buffer = std::make_shared<SharedBuffer>();
    buffer->bytes = error.empty() ? count * elem : 0;
    buffer->stride = (buffer->bytes + kPage - 1) / kPage * kPage;
    buffer->map_bytes = kPage + buffer->stride * ctx->size;
    buffer->id = ctx->next_buffer++;
    const std::string label = ctx->name + "-" + std::to_string(buffer->id);
    const Fingerprint fp{0, count, DT_EMPTY_SHARED, dtype, -1, -1};
    const bool creator = ctx->rank == 0;
    // Rank 0 creates the buffer's segment, unnamed ([Note: unnamed segments] in segment.cc), and
    // everyone learns whether it could and which descriptor to open; then the others map it, and
    // everyone learns whether all could. Rank 0 closes its descriptor on the way out: by then
    // every rank has its own mapping or has failed.
    Descriptor created;
    std::string share;
    if (creator && error.empty()) {
      try {
        buffer->base = createShared(label, buffer->map_bytes, &created.fd, &share);
      } catch (const Failure& e) {
        error = e.what();
      }
    }
    share = agree(ctx, fp, error, share);
    if (!creator) {
      try {
        buffer->base =
            openShared(label, ctx->pids[0], share, buffer->map_bytes, "a peer resized it");
      } catch (const Failure& e) {
        error = e.what();
      }
    }
    agree(ctx, fp, error);
    auto* handle = new dt_shm_buffer{buffer, buffer->part(ctx->rank)};
    {
      std::lock_guard<std::mutex> lock(ctx->buffers_mu);
      auto& list = ctx->buffers;
      list.erase(std::remove_if(list.begin(), list.end(), [](auto& w) { return w.expired(); }),
                 list.end());
      list.push_back(buffer);
    }
    *out = handle;
  });
}

void* dt_shm_buffer_data(dt_shm_buffer* buffer) {
  return buffer == nullptr ? nullptr : buffer->data;
}

int dt_shm_buffer_free(dt_shm_buffer* buffer) {
  delete buffer;
  return DT_OK;
}

}  // extern "C"
