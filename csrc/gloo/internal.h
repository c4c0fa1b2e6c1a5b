// Shared between the shim's translation units: the context behind dt_gloo_ctx, the
// Failure type that carries a status to the C ABI, the slot prefixes of our own messages,
// deadlines, and the reduction kernels.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtrain_gloo.h"

namespace dtrain::p2p {
class Book;
}

struct dt_gloo_ctx {
  std::mutex call_mu;  // one native call at a time per context
  std::mutex error_mu;
  std::string error;

  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> gloo;
  std::chrono::milliseconds timeout{0};
  // How Gloo prints the far end of our connection to each group rank ("[10.0.0.2]:41234"),
  // so that a transport error names the rank instead of a socket address.
  std::map<std::string, int> peer_rank;
  // global_ranks[i] is group rank i's rank in the job; messages always name job ranks.
  std::vector<int> global_ranks;
  uint64_t seq = 0;    // collectives issued so far; the fingerprint carries it as "op #N"
  std::string broken;  // set after a transport failure: the pairs are in an unknown state

  // First messages of each collective (see [Note: fingerprint] in fingerprint.cc): one
  // region per peer of a header plus up to inline_bytes of payload. Declared after `gloo`
  // so that these buffers go first.
  size_t inline_bytes = 0;
  size_t region = 0;
  std::vector<uint64_t> inbox_mem;  // uint64_t: 8-byte aligned regions
  std::vector<uint64_t> stage_mem;
  std::unique_ptr<gloo::transport::UnboundBuffer> inbox;
  std::unique_ptr<gloo::transport::UnboundBuffer> stage;
  // Point-to-point messages (p2p.cc): numbered per peer, shared with the ops still running.
  std::shared_ptr<dtrain::p2p::Book> p2p;

  // The job rank of group rank i.
  int jobRank(int i) const {
    return i >= 0 && i < static_cast<int>(global_ranks.size()) ? global_ranks[i] : i;
  }
  // "rank 5" for group rank i.
  std::string rankName(int i) const { return "rank " + std::to_string(jobRank(i)); }
};

namespace dtrain {

// An error with a status, thrown inside the shim and caught at the C ABI.
struct Failure : std::runtime_error {
  Failure(dt_collective_status status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  dt_collective_status status;
};

// Slot prefixes of our own traffic; Gloo's algorithms use 0x01..0x08.
constexpr uint8_t kFingerprintSlotPrefix = 0x40;
constexpr uint8_t kReduceScatterSlotPrefix = 0x41;

// Time left until `deadline`, at least 1 ms: a spent deadline must still time out at once, and
// Gloo reads -1 ms as "use the context's default timeout".
inline std::chrono::milliseconds remaining(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : std::chrono::milliseconds(1);
}

// Allocates the first-message buffers of a freshly connected context.
void setupFirstMessages(dt_gloo_ctx* ctx);

// Runs `body`, turning any exception into a status and the context's error message.
int guard(dt_gloo_ctx* ctx, const std::function<void()>& body);
// The context's error message: set (never throws) and read, under its lock.
void setLastError(dt_gloo_ctx* ctx, const char* message) noexcept;

// Copies `message` into buf (len bytes), truncated to fit and NUL-terminated; allocates nothing,
// so error paths may call it under a lock. The last_error entry points of both backends use it.
inline void copyMessage(const std::string& message, char* buf, size_t len) noexcept {
  if (buf == nullptr || len == 0) return;
  const size_t n = message.size() < len - 1 ? message.size() : len - 1;
  memcpy(buf, message.data(), n);
  buf[n] = '\0';
}
std::string lastErrorOf(dt_gloo_ctx* ctx);

// dt_gloo_allgather's argument checks, which throw Failure(DT_EINVAL) before anything is sent.
void checkAllGather(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype,
                    void* const* outs, uint64_t nouts);
// dt_gloo_allgather's body, for a caller holding ctx->call_mu (work.cc runs it on its own thread).
void allGather(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype, void* const* outs,
               uint64_t nouts);

size_t dtypeSize(int dtype);

// Aborts the point-to-point ops still running on `ctx` and waits for them (p2p.cc).
void closeP2P(dt_gloo_ctx* ctx);

// Elementwise out[i] = a[i] (op) b[i]; out may alias a or b. AVG reduces as a sum.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);
ReduceFn reduceFn(int dtype, int op);
// Whether `dtype` is a floating-point type (f32, bf16, f16): AVG is defined for those only.
bool isFloatDtype(int dtype);
// buf[i] /= divisor over `n` elements of `dtype`: the second half of AVG ([Note: half reductions]
// in reduce.cc for the 2-byte types).
void divideInPlace(void* buf, size_t n, int dtype, int divisor);

}  // namespace dtrain
