// The shared-memory context's lifecycle: creating and mapping the group's segment (unnamed, so
// that no kill leaves it behind), watching the peers' processes, the issue queue, and the
// exception-to-status boundary of the C ABI.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
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
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
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

Descriptor::~Descriptor() {
  if (fd >= 0) close(fd);
}

// [Note: unnamed segments]
// A segment never has a name in /dev/shm, so no kill at any moment can leave one behind and no
// stranger can take, predict or watch for one. The creator makes an unnamed file in /dev/shm's
// tmpfs (O_TMPFILE | O_EXCL: it can never be linked in later), which counts against /dev/shm's
// size as a named one would, and keeps its descriptor open until every rank has mapped it; the
// others open that descriptor through /proc/<creator>/fd/<fd>, which the kernel allows only to
// processes that could read the creator's memory (the same user), and the file's mode is 0600.
// The descriptor number travels through the job's authenticated store (the group segment) or
// the group segment itself (shared buffers), with the file's inode: a rank that opened another
// file (the creator died and its process id was reused) sees a different inode and fails
// naming it. Once the last process unmaps it, the kernel frees the memory: nothing to clean up.
// A name-based design (shm_open, then unlink once all mapped) leaks the name whenever the
// creator dies in between, and any cleanup by a survivor or the launcher misses the case where
// the whole job is killed at once.
char* createShared(const std::string& label, size_t bytes, int* fd_out, std::string* share) {
  rlimit fsize;
  if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
      bytes > fsize.rlim_cur) {
    // Growing the file past it would raise SIGXFSZ, which kills the process.
    throw Failure(DT_EINTERNAL, "the file size limit (ulimit -f, " +
                                    std::to_string(fsize.rlim_cur) + " bytes) is below the " +
                                    std::to_string(bytes) + " bytes of " + label +
                                    ": raise it, or set DTRAIN_SHM=0 to use Gloo instead");
  }
  const int fd = open("/dev/shm", O_TMPFILE | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Failure(DT_EINTERNAL, errnoText("creating " + label +
                                          " as an unnamed file in /dev/shm (O_TMPFILE; set "
                                          "DTRAIN_SHM=0 to use Gloo instead)"));
  }
  Descriptor closer{fd};
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    throw Failure(DT_EINTERNAL, errnoText("ftruncate " + label + " to " + std::to_string(bytes) +
                                          " bytes"));
  }
  // tmpfs takes any size from ftruncate and faults later: reserve the pages now, so that a full
  // /dev/shm is an error here rather than SIGBUS at the first write.
  const int reserved = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (reserved != 0 && reserved != EOPNOTSUPP && reserved != EINVAL) {
    throw Failure(DT_EINTERNAL, "no room for " + std::to_string(bytes) + " bytes of " + label +
                                    " in /dev/shm (" + strerror(reserved) +
                                    "): enlarge /dev/shm (docker run --shm-size), or set "
                                    "DTRAIN_SHM=0 to use Gloo instead");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) throw Failure(DT_EINTERNAL, errnoText("fstat " + label));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw Failure(DT_EINTERNAL, errnoText("mmap " + label));
  *share = std::to_string(fd) + ":" + std::to_string(st.st_ino);
  *fd_out = fd;
  closer.fd = -1;
  return static_cast<char*>(p);
}

char* openShared(const std::string& label, int pid, const std::string& share, size_t bytes,
                 const char* hint) {
  int fd = -1;
  unsigned long long ino = 0;
  int used = 0;
  if (sscanf(share.c_str(), "%d:%llu%n", &fd, &ino, &used) != 2 || fd < 0 ||
      used != static_cast<int>(share.size())) {
    throw Failure(DT_EINVAL, "the creating rank's handle of " + label + " should be " +
                                 "\"<descriptor>:<inode>\", got \"" + share + "\"");
  }
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const std::string what = label + " through " + path + " (the creating rank's descriptor)";
  const int mine = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0) {
    const int why = errno;
    throw Failure(why == ENOENT ? DT_EPEER : DT_EINTERNAL,
                  "opening " + what + ": " + strerror(why) +
                      (why == ENOENT ? " (did it exit?)"
                       : why == EACCES || why == EPERM
                           ? " (do all ranks run as one user, in one pid namespace?)"
                           : ""));
  }
  Descriptor closer{mine};
  struct stat st;
  if (fstat(mine, &st) != 0) throw Failure(DT_EINTERNAL, errnoText("fstat " + what));
  if (!S_ISREG(st.st_mode) || st.st_ino != ino || st.st_uid != geteuid()) {
    throw Failure(DT_EPEER, what + " is not the file it created (inode " +
                                std::to_string(st.st_ino) + " of uid " +
                                std::to_string(st.st_uid) + ", expected inode " +
                                std::to_string(ino) + "): its process is gone, its id reused");
  }
  if (static_cast<size_t>(st.st_size) != bytes) {
    throw Failure(DT_EINTERNAL, label + " has " + std::to_string(st.st_size) +
                                    " bytes, expected " + std::to_string(bytes) + " (" + hint +
                                    ")");
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  if (p == MAP_FAILED) throw Failure(DT_EINTERNAL, errnoText("mmap " + label));
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
    // The creator's `name` is the segment's label; the others' is the creator's handle,
    // "<label>:<descriptor>:<inode>" (dt_shm_ctx_handle).
    const char* share = name == nullptr ? nullptr : strchr(name, ':');
    const std::string label =
        name == nullptr ? "" : share == nullptr ? name : std::string(name, share - name);
    if (label.size() < 2 || label[0] != '/' || label.find('/', 1) != std::string::npos ||
        (share != nullptr) == (create != 0) || (create == 0) != (rank != 0)) {
      throw Failure(DT_EINVAL, std::string("segment ") +
                                   (create ? "label must be \"/label\" (group rank 0)"
                                           : "handle must be \"/label:<descriptor>:<inode>\" "
                                             "(not group rank 0)") +
                                   ", got \"" + (name ? name : "(null)") + "\" on rank " +
                                   std::to_string(rank));
    }
    ctx->name = label;
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
    const char* hint = "do all ranks agree on the group size?";
    char* base = create ? createShared(label, bytes, &ctx->fd, &ctx->share)
                        : openShared(label, ctx->pids[0], share + 1, bytes, hint);
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
    h->mapped.fetch_add(1);
  });
}

int dt_shm_ctx_handle(dt_shm_ctx* ctx, char* buf, size_t len) {
  if (ctx == nullptr || ctx->fd < 0 || buf == nullptr) return -1;
  const std::string handle = ctx->name + ":" + ctx->share;
  dtrain::copyMessage(handle, buf, len);
  return static_cast<int>(handle.size());
}

int dt_shm_ctx_free(dt_shm_ctx* ctx) {
  if (ctx == nullptr) return DT_OK;
  if (const size_t running = closeP2P(ctx); running > 0) {
    // An op that outlived its abort still reads the context and the mapping: leave both to the
    // process's exit rather than free memory under it.
    fprintf(stderr,
            "dtrain: %zu point-to-point op(s) on %s still ran %lld ms after the close; its "
            "segment stays mapped until the process exits\n",
            running, ctx->name.c_str(), static_cast<long long>(ctx->timeout.count()));
    return DT_OK;
  }
  if (ctx->fd >= 0) close(ctx->fd);
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
  return statusOf(ctx, [&] {
    waitMapped(ctx);
    // Every rank holds its own mapping now ([Note: unnamed segments]).
    if (ctx->fd >= 0) close(ctx->fd);
    ctx->fd = -1;
  });
}

double dt_shm_clock_us(void) { return nowUs(); }

uint64_t dt_shm_ticket(dt_shm_ctx* ctx) {
  std::lock_guard<std::mutex> lock(ctx->queue_mu);
  return ctx->next_ticket++;
}

}  // extern "C"
