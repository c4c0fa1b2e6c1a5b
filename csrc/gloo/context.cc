// Context lifecycle and error reporting for the C ABI: creation, rendezvous through the
// dtrain store, the peer address table, and the exception-to-status boundary.
#include <gloo/allgather.h>
#include <gloo/common/error.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <string.h>

#include <new>

#include "internal.h"
#include "store.h"

namespace {

// Error of the last failed dt_gloo_ctx_new, which has no context to hold it.
thread_local std::string g_new_error;

// Wide enough for "[ipv6 address]:port" as Gloo prints it.
constexpr size_t kAddrLen = 96;

// [Note: naming peers]
// Gloo's transport errors name the peer by socket address, and which address depends on
// the side of the connection and on Gloo's version: the peer's listening address from the
// rendezvous, or the address of the connected socket. We record both for every peer: the
// former from the rendezvous values the store returned, the latter by an allgather of each
// rank's connected pair addresses.
void learnPeerAddresses(dt_gloo_ctx* ctx, const dtrain::StoreClient& store) {
  auto& g = *ctx->gloo;
  const size_t n = static_cast<size_t>(g.size);
  for (int i = 0; i < g.size; i++) {
    auto bundle = store.fetched().find(std::to_string(i));
    if (i == g.rank || bundle == store.fetched().end() || g.size < 2) continue;
    // Rank i's value holds its pair addresses for every other rank, in rank order.
    const auto& bytes = bundle->second;
    const size_t chunk = bytes.size() / (n - 1);
    const size_t at = static_cast<size_t>(g.rank < i ? g.rank : g.rank - 1) * chunk;
    if (chunk == 0 || bytes.size() % (n - 1) != 0) continue;
    try {
      gloo::transport::tcp::Address addr(
          std::vector<char>(bytes.begin() + at, bytes.begin() + at + chunk));
      ctx->peer_rank[addr.str()] = i;
    } catch (const std::exception&) {
      // An unexpected layout only costs us the rank in an error message.
    }
  }
  std::vector<char> mine(n * kAddrLen, 0);
  for (int i = 0; i < g.size; i++) {
    if (i == g.rank) continue;
    strncpy(&mine[i * kAddrLen], g.getPair(i)->address().str().c_str(), kAddrLen - 1);
  }
  std::vector<char> all(n * n * kAddrLen, 0);
  gloo::AllgatherOptions opts(ctx->gloo);
  opts.setInput(mine.data(), mine.size());
  opts.setOutput(all.data(), all.size());
  opts.setTimeout(ctx->timeout);
  gloo::allgather(opts);
  for (size_t i = 0; i < n; i++) {
    if (static_cast<int>(i) == g.rank) continue;
    const char* entry = &all[(i * n + g.rank) * kAddrLen];
    ctx->peer_rank[std::string(entry, strnlen(entry, kAddrLen))] = static_cast<int>(i);
  }
}

}  // namespace

namespace dtrain {

void setLastError(dt_gloo_ctx* ctx, const char* message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(ctx->error_mu);
    ctx->error = message;
  } catch (...) {
    // Out of memory for the message itself: the status still tells what happened.
  }
}

std::string lastErrorOf(dt_gloo_ctx* ctx) {
  std::lock_guard<std::mutex> lock(ctx->error_mu);
  return ctx->error;
}

int guard(dt_gloo_ctx* ctx, const std::function<void()>& body) {
  try {
    body();
    return DT_OK;
  } catch (const Failure& e) {
    setLastError(ctx, e.what());
    return e.status;
  } catch (const StoreError& e) {
    setLastError(ctx, e.what());
    return DT_ESTORE;
  } catch (const std::bad_alloc&) {
    setLastError(ctx, "out of memory");
    return DT_EINTERNAL;
  } catch (const std::exception& e) {
    try {
      setLastError(ctx, (std::string("gloo: ") + e.what()).c_str());
    } catch (...) {
      setLastError(ctx, e.what());
    }
    return DT_EINTERNAL;
  } catch (...) {
    setLastError(ctx, "unknown C++ exception");
    return DT_EINTERNAL;
  }
}

size_t dtypeSize(int dtype) {
  switch (dtype) {
    case DT_F32:
    case DT_I32:
      return 4;
    case DT_BF16:
    case DT_F16:
      return 2;
    default:
      return 0;
  }
}

}  // namespace dtrain

extern "C" {

int dt_gloo_ctx_new(dt_gloo_ctx** out) {
  if (out == nullptr) return DT_EINVAL;
  *out = new (std::nothrow) dt_gloo_ctx();
  if (*out == nullptr) {
    g_new_error = "out of memory allocating a Gloo context";
    return DT_EINTERNAL;
  }
  return DT_OK;
}

int dt_gloo_last_error(dt_gloo_ctx* ctx, char* buf, size_t len) {
  // Copies under the lock without allocating, so nothing here can throw.
  std::unique_lock<std::mutex> lock;
  const std::string* message = &g_new_error;
  if (ctx != nullptr) {
    lock = std::unique_lock<std::mutex>(ctx->error_mu);
    message = &ctx->error;
  }
  dtrain::copyMessage(*message, buf, len);
  return static_cast<int>(message->size());
}

int dt_gloo_ctx_connect(dt_gloo_ctx* ctx, const char* store_host, int store_port,
                        const char* token, const char* prefix, int rank, int size,
                        const int32_t* global_ranks, const char* host, const char* iface,
                        int64_t timeout_ms) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return dtrain::guard(ctx, [&] {
    using dtrain::Failure;
    if (ctx->gloo) throw Failure(DT_EINVAL, "context is already connected");
    if (size < 1 || rank < 0 || rank >= size) {
      throw Failure(DT_EINVAL, "rank " + std::to_string(rank) + " is outside world size " +
                                   std::to_string(size));
    }
    if (timeout_ms <= 0) {
      throw Failure(DT_EINVAL, "timeout must be positive, got " + std::to_string(timeout_ms));
    }
    ctx->timeout = std::chrono::milliseconds(timeout_ms);
    ctx->global_ranks.resize(size);
    for (int i = 0; i < size; i++) ctx->global_ranks[i] = global_ranks ? global_ranks[i] : i;

    gloo::transport::tcp::attr attr;
    if (iface != nullptr && iface[0] != '\0') {
      attr.iface = iface;
    } else {
      attr.hostname = host;
    }
    try {
      ctx->device = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw Failure(DT_EINVAL, std::string("cannot bind Gloo to ") +
                                   (attr.iface.empty() ? "host " + attr.hostname
                                                       : "interface " + attr.iface) +
                                   ": " + e.what());
    }
    dtrain::StoreClient store(store_host, store_port, token, prefix, rank, ctx->timeout);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(ctx->timeout);
    try {
      context->connectFullMesh(store, ctx->device);
    } catch (const gloo::IoException& e) {
      throw Failure(DT_ETIMEOUT, std::string("connecting to the other ranks failed: ") +
                                     e.what());
    }
    ctx->gloo = context;
    learnPeerAddresses(ctx, store);
    dtrain::setupFirstMessages(ctx);
  });
}

int dt_gloo_ctx_free(dt_gloo_ctx* ctx) {
  if (ctx == nullptr) return DT_OK;
  // A plain close (FIN, not Gloo's closeConnections() reset) so that a peer still reading
  // our last message of a finished collective gets all of it.
  { std::lock_guard<std::mutex> lock(ctx->call_mu); }
  dtrain::closeP2P(ctx);
  delete ctx;
  return DT_OK;
}

}  // extern "C"
