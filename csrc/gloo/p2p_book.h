// The bookkeeping of point-to-point messages on one context, the same for Gloo (p2p.cc) and
// shared memory (csrc/shm/p2p.cc): the number of the next message to and from each peer, the ops
// still running (closing the context aborts them and waits for them to return), and the failure
// that broke the context's point-to-point traffic.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace dtrain::p2p {

class Book {
 public:
  explicit Book(int size) : sent_(size, 0), received_(size, 0) {}

  // The number of the next message of `kind` with `peer`, taken in posting order.
  uint64_t take(int kind, int peer) {
    std::lock_guard<std::mutex> lock(mu_);
    return kind == 0 ? sent_[peer]++ : received_[peer]++;
  }

  // Registers a running op; `abort` wakes it (from any thread). False once closing.
  bool enter(const void* op, std::function<void()> abort) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return false;
    running_.emplace_back(op, std::move(abort));
    return true;
  }

  void leave(const void* op) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      if (it->first == op) {
        running_.erase(it);
        break;
      }
    }
    cv_.notify_all();
  }

  bool closing() {
    std::lock_guard<std::mutex> lock(mu_);
    return closing_;
  }

  // Aborts every running op and waits (up to `limit`) until each has returned; returns how many
  // still run.
  size_t close(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    closing_ = true;
    for (auto& [op, abort] : running_) abort();
    cv_.wait_for(lock, limit, [&] { return running_.empty(); });
    return running_.size();
  }

  // The failure that broke point-to-point traffic, or "".
  std::string broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

  void breakWith(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = message;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> sent_, received_;
  std::vector<std::pair<const void*, std::function<void()>>> running_;
  bool closing_ = false;
  std::string broken_;
};

// Whether an op's run has returned, for a thread that waits for a run on another thread (a
// blocking batch runs its messages on worker threads and the calling one, then waits for all).
class Finished {
 public:
  void set() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace dtrain::p2p
