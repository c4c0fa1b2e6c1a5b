// A gloo::rendezvous::Store that speaks the dtrain store protocol (documented in
// src/distributed/store/server.ts) over one TCP connection, with the job token.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain {

// Thrown for every store failure; the shim maps it to DT_ESTORE.
struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class StoreClient : public gloo::rendezvous::Store {
 public:
  // Connects (retrying while the server is not up yet) and performs the handshake.
  StoreClient(const std::string& host, int port, const std::string& token,
              const std::string& prefix, int rank, std::chrono::milliseconds timeout);
  ~StoreClient() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Every value get() returned, by key (without the prefix): Gloo's rendezvous reads the
  // peers' pre-connection addresses this way, and error messages may name them.
  const std::map<std::string, std::vector<char>>& fetched() const { return fetched_; }

 private:
  std::string authenticate(const std::string& token, int rank);
  std::vector<char> request(const std::vector<char>& body, const std::string& what,
                            std::chrono::milliseconds timeout);
  void writeAll(const void* data, size_t len);
  void readAll(void* data, size_t len);

  std::string where_;  // "host:port", for messages
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::mutex mu_;
  std::map<std::string, std::vector<char>> fetched_;
};

}  // namespace dtrain
