// The shared-memory context's lifecycle: mapping the group's segment (and unlinking its name as
// soon as every rank has it), watching the peers' processes, the issue queue, and the
// exception-to-status boundary of the C ABI.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <new>
#include <thread>

#include "internal.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

using dtrain::Failure;
using namespace dtrain::shm;

namespace {

thread_local std::string g_new_error;

void setError(dt_shm_ctx* ctx, const char* message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(ctx->error_mu);
    ctx->error = message;
  } catch (...) {
    // Out of memory for the message itself: the status still tells what happened.
  }
}

// Sets the context's error slot and, when asked, a copy that no later failure overwrites.
void fail(dt_shm_ctx* ctx, const char* message, std::string* error) noexcept {
  setError(ctx, message);
  if (error == nullptr) return;
  try {
    *error = message;
  } catch (...) {
    // Out of memory for the copy: the status still tells what happened.
  }
}

std::string errnoText(const std::string& what) { return what + ": " + strerror(errno); }

double nowUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// Maps the group's segment, creating it when `create` (rank 0; the others open it once told).
char* mapSegment(dt_shm_ctx* ctx, bool create, size_t bytes) {
  return mapShared(ctx->name, create, bytes, "do all ranks agree on the group size?",
                   &ctx->linked);
}

// Runs `body` and returns DT_OK, or the status it threw, its message kept as the context's error.
int statusOf(dt_shm_ctx* ctx, const std::function<void()>& body) noexcept {
  try {
    body();
    return DT_OK;
  } catch (const Failure& e) {
    setError(ctx, e.what());
    return e.status;
  } catch (const std::exception& e) {
    setError(ctx, e.what());
    return DT_EINTERNAL;
  }
}

}  // namespace

namespace dtrain::shm {

char* mapShared(const std::string& name, bool create, size_t bytes, const char* hint,
                bool* created) {
  const int flags = create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR;
  int fd = shm_open(name.c_str(), flags, 0600);
  if (fd < 0) throw Failure(DT_EINTERNAL, errnoText("shm_open " + name));
  *created = create;
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    throw Failure(DT_EINTERNAL, errnoText("ftruncate " + name + " to " + std::to_string(bytes) +
                                          " bytes"));
  }
  // tmpfs takes any size from ftruncate and faults later: reserve the pages now, so that a full
  // /dev/shm is an error here rather than SIGBUS at the first write.
  const int reserved = create ? posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : 0;
  if (reserved != 0 && reserved != EOPNOTSUPP && reserved != EINVAL) {
    close(fd);
    throw Failure(DT_EINTERNAL, "no room for " + std::to_string(bytes) + " bytes of " + name +
                                    " in /dev/shm (" + strerror(reserved) +
                                    "): enlarge /dev/shm (docker run --shm-size), or set "
                                    "DTRAIN_SHM=0 to use Gloo instead");
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    throw Failure(DT_EINTERNAL, name + " has " + std::to_string(st.st_size) + " bytes, expected " +
                                    std::to_string(bytes) + " (" + hint + ")");
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) throw Failure(DT_EINTERNAL, errnoText("mmap " + name));
  return static_cast<char*>(p);
}

int serve(dt_shm_ctx* ctx, uint64_t ticket, double* timing, const std::function<void()>& body,
          std::string* error) {
  {
    std::unique_lock<std::mutex> lock(ctx->queue_mu);
    if (ticket < ctx->serving || ticket >= ctx->next_ticket) {
      setError(ctx, ("ticket " + std::to_string(ticket) + " was not issued or already served")
                        .c_str());
      return DT_EINVAL;
    }
    ctx->queue_cv.wait(lock, [&] { return ctx->serving == ticket; });
  }
  const double start = nowUs();
  int status = DT_OK;
  try {
    if (ctx->base == nullptr) throw Failure(DT_EINVAL, "shared-memory context is not open");
    body();
  } catch (const Failure& e) {
    status = e.status;
    fail(ctx, e.what(), error);
  } catch (const std::bad_alloc&) {
    status = DT_EINTERNAL;
    fail(ctx, "out of memory", error);
  } catch (const std::exception& e) {
    status = DT_EINTERNAL;
    fail(ctx, e.what(), error);
  }
  if (timing != nullptr) {
    timing[0] = start;
    timing[1] = nowUs();
  }
  {
    std::lock_guard<std::mutex> lock(ctx->queue_mu);
    ctx->serving++;
  }
  ctx->queue_cv.notify_all();
  return status;
}

int serveWhenIdle(dt_shm_ctx* ctx, const char* what, const std::function<void()>& body,
                  double* timing) {
  uint64_t ticket;
  {
    std::unique_lock<std::mutex> lock(ctx->queue_mu);
    // Waits while the queue moves; gives up only when it stood still for a whole timeout.
    for (uint64_t seen = ctx->serving; ctx->serving != ctx->next_ticket; seen = ctx->serving) {
      const bool moved = ctx->queue_cv.wait_for(lock, ctx->timeout, [&] {
        return ctx->serving != seen || ctx->serving == ctx->next_ticket;
      });
      if (!moved) {
        setError(ctx, (std::string(what) + ": " +
                       std::to_string(ctx->next_ticket - ctx->serving) +
                       " collective(s) issued earlier on this group did not progress in " +
                       std::to_string(ctx->timeout.count()) +
                       " ms; a blocking collective runs only after every earlier one ended")
                          .c_str());
        return DT_ETIMEOUT;
      }
    }
    ticket = ctx->next_ticket++;
  }
  return serve(ctx, ticket, timing, body);
}

}  // namespace dtrain::shm

extern "C" {

int dt_shm_ctx_new(dt_shm_ctx** out) {
  if (out == nullptr) return DT_EINVAL;
  *out = new (std::nothrow) dt_shm_ctx();
  if (*out == nullptr) {
    g_new_error = "out of memory";
    return DT_EINTERNAL;
  }
  return DT_OK;
}

int dt_shm_last_error(dt_shm_ctx* ctx, char* buf, size_t len) {
  const std::string* message = &g_new_error;
  std::unique_lock<std::mutex> lock;
  if (ctx != nullptr) {
    lock = std::unique_lock<std::mutex>(ctx->error_mu);
    message = &ctx->error;
  }
  dtrain::copyMessage(*message, buf, len);
  return static_cast<int>(message->size());
}

int dt_shm_ctx_open(dt_shm_ctx* ctx, const char* name, int create, int rank, int size,
                    const int32_t* global_ranks, const int32_t* pids, uint64_t slot_bytes,
                    int64_t timeout_ms) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->queue_mu);
  return statusOf(ctx, [&] {
    if (ctx->base != nullptr) throw Failure(DT_EINVAL, "context is already open");
    if (size < 1 || rank < 0 || rank >= size) {
      throw Failure(DT_EINVAL, "rank " + std::to_string(rank) + " is outside group size " +
                                   std::to_string(size));
    }
    if (slot_bytes < 4096 || slot_bytes % 64 != 0) {
      throw Failure(DT_EINVAL, "slot size must be a multiple of 64 bytes, at least 4096, got " +
                                   std::to_string(slot_bytes));
    }
    if (timeout_ms <= 0) {
      throw Failure(DT_EINVAL, "timeout must be positive, got " + std::to_string(timeout_ms));
    }
    if (name == nullptr || name[0] != '/' || strchr(name + 1, '/') != nullptr) {
      throw Failure(DT_EINVAL, std::string("segment name must be \"/name\", got \"") +
                                   (name ? name : "(null)") + "\"");
    }
    ctx->name = name;
    ctx->rank = rank;
    ctx->size = size;
    ctx->timeout = std::chrono::milliseconds(timeout_ms);
    ctx->global_ranks.assign(global_ranks, global_ranks + size);
    ctx->pids.assign(pids, pids + size);
    for (int r = 0; r < size; r++) {
      int fd = r == rank ? -1 : static_cast<int>(syscall(SYS_pidfd_open, pids[r], 0));
      if (fd < 0 && r != rank && errno == ESRCH) {
        throw Failure(DT_EPEER, "shared-memory rendezvous: " + ctx->rankName(r) +
                                    " (process " + std::to_string(pids[r]) + ") is gone");
      }
      ctx->pidfds.push_back(fd);
    }
    ctx->slot_bytes = slot_bytes;
    const size_t bytes = segmentBytes(size, slot_bytes);
    char* base = mapSegment(ctx, create != 0, bytes);
    ctx->base = base;
    ctx->bytes = bytes;
    auto* h = ctx->header();
    if (create) {
      h->size = static_cast<uint32_t>(size);
      h->failed.store(-1);
      h->magic = kMagic;  // published by the store key the other ranks wait for
    } else if (h->magic != kMagic || h->size != static_cast<uint32_t>(size)) {
      throw Failure(DT_EINTERNAL, ctx->name + " is not a dtrain segment of " +
                                      std::to_string(size) + " ranks");
    }
    if (h->mapped.fetch_add(1) + 1 == static_cast<uint32_t>(size)) {
      shm_unlink(ctx->name.c_str());
    }
  });
}

int dt_shm_ctx_free(dt_shm_ctx* ctx) {
  if (ctx == nullptr) return DT_OK;
  // The creator unlinks a name that some rank never mapped (it failed or died before it could).
  if (ctx->linked &&
      (ctx->base == nullptr || ctx->header()->mapped.load() < static_cast<uint32_t>(ctx->size))) {
    shm_unlink(ctx->name.c_str());
  }
  if (ctx->base != nullptr) munmap(ctx->base, ctx->bytes);
  for (int fd : ctx->pidfds) {
    if (fd >= 0) close(fd);
  }
  delete ctx;
  return DT_OK;
}

int dt_shm_abort(dt_shm_ctx* ctx, int status, const char* message) {
  if (ctx == nullptr || ctx->base == nullptr || message == nullptr) return DT_EINVAL;
  try {
    recordFailure(ctx, status, message);
    return DT_OK;
  } catch (const std::exception&) {
    return DT_EINTERNAL;
  }
}

int dt_shm_ctx_wait_mapped(dt_shm_ctx* ctx) {
  if (ctx == nullptr || ctx->base == nullptr) return DT_EINVAL;
  return statusOf(ctx, [&] { waitMapped(ctx); });
}

uint64_t dt_shm_ticket(dt_shm_ctx* ctx) {
  std::lock_guard<std::mutex> lock(ctx->queue_mu);
  return ctx->next_ticket++;
}

}  // extern "C"
