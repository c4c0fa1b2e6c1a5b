// Error translation for collectives: Gloo's transport errors name a socket address and a
// source location; ours name the operation, the op number and the rank.
#include "errors.h"

#include <cctype>

namespace dtrain {

std::string withoutLocation(const std::string& message) {
  if (!message.empty() && message[0] == '[') {
    auto end = message.find("] ");
    if (end != std::string::npos) return message.substr(end + 2);
  }
  return message;
}

namespace {

// The group rank whose address appears in a Gloo transport error, or -1.
int rankInMessage(const dt_gloo_ctx* ctx, const std::string& message) {
  for (const auto& [addr, rank] : ctx->peer_rank) {
    for (auto at = message.find(addr); at != std::string::npos;
         at = message.find(addr, at + 1)) {
      auto next = at + addr.size();
      if (next == message.size() || !isdigit(static_cast<unsigned char>(message[next]))) {
        return rank;
      }
    }
  }
  return -1;
}

}  // namespace

// Marks the context broken and resets its connections, then throws an error naming the
// operation and, where known, the peer. Gloo's pairs are in an unknown state after an IO
// error; resetting them also makes every peer still blocked on us fail now instead of at
// its timeout, which is what lets a job notice a dead rank within seconds.
[[noreturn]] void abortWith(dt_gloo_ctx* ctx, dt_collective_status status,
                            const std::string& message) {
  ctx->broken = message;
  ctx->gloo->closeConnections();
  throw Failure(status, message);
}

[[noreturn]] void transportFailure(dt_gloo_ctx* ctx, const Fingerprint& fp,
                                   const std::exception& e) {
  auto detail = withoutLocation(e.what());
  std::string message;
  dt_collective_status status;
  if (detail.find("Timed out") != std::string::npos ||
      detail.find("timeout") != std::string::npos) {
    status = DT_ETIMEOUT;
    message = opLabel(fp) + ": timed out after " + std::to_string(ctx->timeout.count()) +
              " ms waiting for a peer (" + detail + ")";
  } else {
    status = DT_EPEER;
    int peer = rankInMessage(ctx, detail);
    message = opLabel(fp) + ": connection to " +
              (peer >= 0 ? ctx->rankName(peer) : std::string("a peer")) +
              " failed (" + detail + ")";
  }
  abortWith(ctx, status, message);
}

}  // namespace dtrain
