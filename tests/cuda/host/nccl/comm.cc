/* Unique ids, communicators and their errors, and the watchdog that finds transfers a dead peer will
 * never finish (see standin.h for what the stand-in is). */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include <gloo/barrier.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "standin.h"

/* [Note: probing a connection]
 * A Gloo tcp connection that fails (the peer died, reset it, or closed it) wakes every transfer
 * still waiting for the peer to match it, but not the one it was in the middle of reading or
 * writing: that one's wait would last until the timeout (60 s by default). The watchdog therefore
 * asks each connection the running work uses whether it has failed, with tcp::Pair::tryRecv on a
 * slot nobody sends on: it throws the connection's error when there is one and otherwise returns
 * false without touching anything. Debian's libgloo-dev lacks gloo/common/memory.h, which
 * gloo/transport/tcp/pair.h includes, so the class is declared here with that one member (the
 * exported, non-virtual function libgloo.so defines); its transport::Pair base comes first, so the
 * address of a context's pair is the address of its tcp::Pair. Gloo 0.0~git20220518 (Debian 12). */
namespace gloo {
namespace transport {
namespace tcp {
class Pair {
 public:
  bool tryRecv(gloo::transport::UnboundBuffer *buf, uint64_t slot, size_t offset, size_t nbytes);
};
}  // namespace tcp
}  // namespace transport
}  // namespace gloo

using namespace nccl_standin;

namespace {

/* The first 8 bytes of every id this library makes; the folder's path follows, NUL-terminated. */
const char kMagic[8] = {'d', 't', 'N', 'C', 'C', 'L', 's', 'i'};
const size_t kPathMax = sizeof(ncclUniqueId) - sizeof kMagic;

/* Slots this stand-in uses have 0xC1 (collectives) or 0xD2 (messages) in the top byte (ops.cc);
 * Gloo's own barrier uses prefix 7. Nobody ever sends on this one. */
const uint64_t kProbeSlot = 0xEEull << 56;

std::mutex g_error_mu;
std::string g_last_error; /* the last failure of any communicator, or of one not made */

/* gloo::rendezvous::FileStore::get waits with the store's 30 s default; this store makes every
 * wait use the communicator's timeout. */
struct TimedFileStore : gloo::rendezvous::FileStore {
  TimedFileStore(const std::string &path, std::chrono::milliseconds timeout)
      : gloo::rendezvous::FileStore(path), timeout(timeout) {}
  using gloo::rendezvous::FileStore::wait;
  void wait(const std::vector<std::string> &keys) override {
    gloo::rendezvous::FileStore::wait(keys, timeout);
  }
  std::chrono::milliseconds timeout;
};

/* 60 s, or DTRAIN_NCCL_STANDIN_TIMEOUT_MS: the rendezvous, and each unit of work, get no longer. */
std::chrono::milliseconds standin_timeout() {
  const char *env = getenv("DTRAIN_NCCL_STANDIN_TIMEOUT_MS");
  if (env != nullptr && env[0] != '\0') {
    char *end = nullptr;
    long long ms = strtoll(env, &end, 10);
    if (end != env && *end == '\0' && ms > 0) return std::chrono::milliseconds(ms);
  }
  return std::chrono::milliseconds(60000);
}

/* Best effort: the FileStore's folder holds only flat files (keys and their temporaries). */
void remove_folder(const std::string &path) {
  DIR *dir = opendir(path.c_str());
  if (dir != nullptr) {
    while (struct dirent *entry = readdir(dir)) {
      if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
      unlink((path + "/" + entry->d_name).c_str());
    }
    closedir(dir);
  }
  rmdir(path.c_str());
}

/* Sets aborted and wakes the running unit's waits; comm->mu is held. */
void abort_locked(Comm *c) {
  c->aborted = true;
  for (Transfer *t : c->live) {
    t->buf->abortWaitRecv();
    t->buf->abortWaitSend();
  }
  c->aborted_cv.notify_all();
}

/* Whether the connection to `peer` has failed, with Gloo's reason ([Note: probing a connection]). */
bool connection_failed(Core *core, int peer, std::string *why) {
  auto &pair = core->gloo->getPair(peer);
  if (!pair) return false;
  try {
    reinterpret_cast<gloo::transport::tcp::Pair *>(pair.get())
        ->tryRecv(core->probe.get(), kProbeSlot, 0, 0);
    return false;
  } catch (const std::exception &e) {
    *why = e.what();
    return true;
  }
}

/* Every 100 ms while work waits: the transfers with a peer whose connection failed are woken (an
 * abortWait, which ops.cc's wait tells from an abort by `poked`); the wait then finds whether its
 * transfer finished before the connection failed, or never will. */
void watch(Core *core) {
  Comm *c = core->comm;
  std::unique_lock<std::mutex> lock(core->wd_mu);
  while (!core->wd_stop) {
    core->wd_cv.wait_for(lock, std::chrono::milliseconds(100));
    if (core->wd_stop) break;
    lock.unlock();
    std::vector<int> peers;
    {
      std::lock_guard<std::mutex> guard(c->mu);
      for (Transfer *t : c->live)
        if (!t->done && !t->poked) peers.push_back(t->peer);
    }
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    for (int peer : peers) {
      std::string why;
      if (!connection_failed(core, peer, &why)) continue;
      std::lock_guard<std::mutex> guard(c->mu);
      for (Transfer *t : c->live) {
        if (t->peer != peer || t->done || t->poked) continue;
        t->poked = true;
        t->peer_error = why;
        if (t->recv) t->buf->abortWaitRecv(); else t->buf->abortWaitSend();
      }
    }
    lock.lock();
  }
}

}  // namespace

namespace nccl_standin {

const char *call_name(Kind kind) {
  switch (kind) {
    case kAllReduce: return "ncclAllReduce";
    case kBroadcast: return "ncclBroadcast";
    case kAllGather: return "ncclAllGather";
    case kReduceScatter: return "ncclReduceScatter";
    case kSend: return "ncclSend";
    case kRecv: return "ncclRecv";
  }
  return "?";
}

/* A peer that went away is NCCL's remote error; anything else (a timeout) a system error. */
int classify(const std::string &message) {
  std::string m(message);
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char ch) { return std::tolower(ch); });
  for (const char *remote : {"closed by peer", "reset by peer", "broken pipe", "connection refused"})
    if (m.find(remote) != std::string::npos) return ncclRemoteError;
  return ncclSystemError;
}

/* Gloo's messages start with one or more "[/path/file.cc:123] "; the reason is what follows. */
std::string strip_location(const std::string &message) {
  std::string m = message;
  while (!m.empty() && m[0] == '[') {
    const size_t end = m.find("] ");
    if (end == std::string::npos || m.find(".cc:") > end) break;
    m.erase(0, end + 2);
  }
  return m;
}

void set_global_error(const std::string &message) {
  std::lock_guard<std::mutex> lock(g_error_mu);
  g_last_error = message;
}

int invalid(Comm *c, int result, const std::string &message) {
  set_global_error(message);
  if (c != nullptr) {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->async_error == ncclSuccess) c->last_error = message;
  }
  return result;
}

int usable(Comm *c) {
  std::lock_guard<std::mutex> lock(c->mu);
  if (c->async_error != ncclSuccess) return c->async_error;
  if (c->aborted || c->destroyed) {
    c->last_error = "the communicator was destroyed or aborted";
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

void record_failure(Comm *c, int result, const std::string &message) {
  set_global_error(message);
  std::lock_guard<std::mutex> lock(c->mu);
  if (c->async_error != ncclSuccess || c->aborted) return;
  c->async_error = result;
  c->last_error = message;
}

void block_until_aborted(Comm *c) {
  std::unique_lock<std::mutex> lock(c->mu);
  c->aborted_cv.wait(lock, [c] { return c->aborted; });
}

void start_watchdog(Core *core) { core->watchdog = std::thread(watch, core); }

Core::~Core() {
  {
    std::lock_guard<std::mutex> lock(wd_mu);
    wd_stop = true;
  }
  wd_cv.notify_all();
  if (watchdog.joinable()) watchdog.join();
}

}  // namespace nccl_standin

STANDIN_EXPORT int ncclGetUniqueId(ncclUniqueId *id) {
  if (id == nullptr) return invalid(nullptr, ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
  const char *tmp = getenv("TMPDIR");
  std::string path = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") +
                     "/dtrain-nccl-standin-XXXXXX";
  if (path.size() >= kPathMax)
    return invalid(nullptr, ncclSystemError, "ncclGetUniqueId: TMPDIR is too long for an id");
  std::vector<char> buf(path.begin(), path.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr)
    return invalid(nullptr, ncclSystemError,
                   std::string("ncclGetUniqueId: mkdtemp ") + path + ": " + strerror(errno));
  memset(id->internal, 0, sizeof id->internal);
  memcpy(id->internal, kMagic, sizeof kMagic);
  memcpy(id->internal + sizeof kMagic, buf.data(), buf.size());
  return ncclSuccess;
}

STANDIN_EXPORT int ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
  if (out == nullptr) return invalid(nullptr, ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *out = nullptr;
  if (memcmp(id.internal, kMagic, sizeof kMagic) != 0)
    return invalid(nullptr, ncclInvalidArgument,
                   "ncclCommInitRank: the id was not made by this stand-in's ncclGetUniqueId");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return invalid(nullptr, ncclInvalidArgument,
                   "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                       std::to_string(nranks));
  const std::string folder(id.internal + sizeof kMagic, strnlen(id.internal + sizeof kMagic, kPathMax));
  const auto timeout = standin_timeout();
  /* A write to a dead peer's socket must fail with EPIPE, not kill the process; Gloo leaves that
   * to its users, and Rust programs such as Deno already ignore SIGPIPE. */
  struct sigaction pipe_action;
  if (sigaction(SIGPIPE, nullptr, &pipe_action) == 0 && pipe_action.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
  auto core = std::make_shared<Core>();
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    TimedFileStore store(folder, timeout);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    context->setTimeout(timeout);
    context->connectFullMesh(store, device);
    /* Every rank has read the store once it passes this, so rank 0 may remove the folder. */
    gloo::BarrierOptions barrier(context);
    barrier.setTimeout(timeout);
    gloo::barrier(barrier);
    core->gloo = context;
    core->probe = context->createUnboundBuffer(&core->probe_byte, 0);
  } catch (const std::exception &e) {
    if (rank == 0) remove_folder(folder);
    return invalid(nullptr, classify(e.what()),
                   "ncclCommInitRank (rank " + std::to_string(rank) + " of " +
                       std::to_string(nranks) + "): " + strip_location(e.what()));
  }
  if (rank == 0) remove_folder(folder);
  Comm *c = new Comm();
  c->rank = rank;
  c->size = nranks;
  c->timeout = timeout;
  core->comm = c;
  core->send_seq.assign(nranks, 0);
  core->recv_seq.assign(nranks, 0);
  start_watchdog(core.get());
  c->core = std::move(core);
  *out = c;
  return ncclSuccess;
}

/* Waits for nothing: queued work keeps the Gloo context alive and finishes on its stream (real NCCL
 * would wait for it here). A communicator whose work failed is aborted instead, since that work
 * only returns at an abort (real NCCL would hang here). */
STANDIN_EXPORT int ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  Comm *c = static_cast<Comm *>(comm);
  std::shared_ptr<Core> core;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->destroyed || c->aborted) return ncclInvalidUsage;
    c->destroyed = true;
    if (c->async_error != ncclSuccess) abort_locked(c);
    core = std::move(c->core);
  }
  core.reset(); /* outside the lock: it may join the watchdog, which takes it */
  return ncclSuccess;
}

/* Returns at once: the running unit's waits are woken and give up, a unit blocked after a failure
 * returns, and later units return without running. The Gloo context goes with the last of them
 * (here when none is queued), which closes the connections, so the peers see this rank leave. */
STANDIN_EXPORT int ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  Comm *c = static_cast<Comm *>(comm);
  std::shared_ptr<Core> core;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->aborted) return ncclSuccess;
    abort_locked(c);
    c->destroyed = true;
    core = std::move(c->core);
  }
  core.reset();
  return ncclSuccess;
}

STANDIN_EXPORT int ncclCommGetAsyncError(ncclComm_t comm, int *result) {
  if (comm == nullptr || result == nullptr) return ncclInvalidArgument;
  Comm *c = static_cast<Comm *>(comm);
  std::lock_guard<std::mutex> lock(c->mu);
  *result = c->async_error;
  return ncclSuccess;
}

/* NCCL's own strings (src/init.cc). */
STANDIN_EXPORT const char *ncclGetErrorString(int result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

/* The communicator's last message ("" when none), or with NULL the last of any; copied per thread
 * so that the pointer stays valid while another thread records a new one. */
STANDIN_EXPORT const char *ncclGetLastError(ncclComm_t comm) {
  thread_local std::string copy;
  if (comm != nullptr) {
    Comm *c = static_cast<Comm *>(comm);
    std::lock_guard<std::mutex> lock(c->mu);
    copy = c->last_error;
  } else {
    std::lock_guard<std::mutex> lock(g_error_mu);
    copy = g_last_error;
  }
  return copy.c_str();
}

/* 2.23.0 in NCCL's encoding (major * 10000 + minor * 100 + patch). This is the stand-in: the number
 * only satisfies a caller that checks for a recent NCCL. */
STANDIN_EXPORT int ncclGetVersion(int *version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = 22300;
  return ncclSuccess;
}
