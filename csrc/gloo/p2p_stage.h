// The receives a Gloo context posts ahead for point-to-point messages ([Note: point-to-point
// protocol] in p2p_message.h). Gloo sends a message at once only to a receive already posted;
// otherwise it announces the send and waits for the receiver's answer, three trips instead of
// one. So each receive from a peer also posts the next message's: its header and a staging
// buffer for a payload of up to kEager bytes, which the sender sends right behind the header.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "p2p_book.h"
#include "p2p_message.h"

namespace dtrain::p2p {

// Payloads up to this size travel with their header, into a staging buffer (one copy); larger
// ones wait for the receiver's verdict and land in place. bench/p2p.ts measured the cut: at 64
// KiB one trip was already slower than three (BENCHMARKS.md, "Point-to-point").
constexpr uint64_t kEager = 32 << 10;

constexpr uint64_t kHeaderSlot = 0x42, kVerdictSlot = 0x43, kPayloadSlot = 0x44, kEagerSlot = 0x45;

// The slot of message `seq` from `from` to `to`: both sides compute it from their own counts.
inline uint64_t slotOf(uint64_t prefix, int from, int to, uint64_t seq) {
  const uint64_t up = from < to ? 1 : 0;
  return (prefix << 56) | (up << 55) | (seq & ((uint64_t(1) << 55) - 1));
}

// One message's receives: its header and its eager payload (empty when the payload is larger).
struct Staged {
  Header header{};
  std::unique_ptr<char[]> data;
  std::unique_ptr<gloo::transport::UnboundBuffer> head, body;
};

// A Book whose context also keeps the receives posted ahead, per peer and message number.
class GlooBook : public Book {
 public:
  GlooBook(int size, std::shared_ptr<gloo::rendezvous::Context> gloo)
      : Book(size), gloo_(std::move(gloo)) {}

  // Message `seq` from `peer`'s receives (posted now unless posted ahead), and the next
  // message's posted ahead.
  std::unique_ptr<Staged> take(int peer, uint64_t seq) {
    std::lock_guard<std::mutex> lock(mu_);
    auto staged = takeLocked(peer, seq);
    auto next = std::make_pair(peer, seq + 1);
    if (ahead_.find(next) == ahead_.end()) ahead_[next] = post(peer, seq + 1);
    return staged;
  }

  // A staging buffer no longer needed, for a later message.
  void recycle(std::unique_ptr<char[]> data) {
    std::lock_guard<std::mutex> lock(mu_);
    if (data && spare_.size() < 4) spare_.push_back(std::move(data));
  }

 private:
  std::unique_ptr<Staged> takeLocked(int peer, uint64_t seq) {
    auto it = ahead_.find({peer, seq});
    if (it == ahead_.end()) return post(peer, seq);
    auto staged = std::move(it->second);
    ahead_.erase(it);
    return staged;
  }

  std::unique_ptr<Staged> post(int peer, uint64_t seq) {
    auto s = std::make_unique<Staged>();
    if (spare_.empty()) {
      s->data.reset(new char[kEager]);
    } else {
      s->data = std::move(spare_.back());
      spare_.pop_back();
    }
    const int me = gloo_->rank;
    s->head = gloo_->createUnboundBuffer(&s->header, sizeof(Header));
    s->body = gloo_->createUnboundBuffer(s->data.get(), kEager);
    s->head->recv(peer, slotOf(kHeaderSlot, peer, me, seq));
    s->body->recv(peer, slotOf(kEagerSlot, peer, me, seq));
    return s;
  }

  std::mutex mu_;
  std::shared_ptr<gloo::rendezvous::Context> gloo_;
  std::map<std::pair<int, uint64_t>, std::unique_ptr<Staged>> ahead_;
  std::vector<std::unique_ptr<char[]>> spare_;
};

}  // namespace dtrain::p2p
