// Native client of the dtrain rendezvous store; see src/distributed/store/server.ts for the protocol.
#include "store.h"

#include <errno.h>
#include <sys/random.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

#include "hmac.h"

namespace dtrain {

namespace {

constexpr char kMagic[4] = {'D', 'T', 'S', 'T'};
constexpr uint16_t kVersion = 3;
constexpr size_t kNonce = 32;
constexpr size_t kProof = 32;
constexpr char kServerLabel[] = "dtrain store server proof";
constexpr char kClientLabel[] = "dtrain store client proof";
constexpr uint8_t kOpSet = 1;
constexpr uint8_t kOpGet = 2;
constexpr uint8_t kOpWait = 3;
constexpr uint8_t kStatusOk = 0;
constexpr uint8_t kStatusTimeout = 1;
// The server answers waits itself; the socket timeout only catches a server that vanished.
constexpr auto kSocketSlack = std::chrono::seconds(10);

void putU32(std::vector<char>& b, uint32_t v) {
  for (int i = 0; i < 4; i++) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void putStr(std::vector<char>& b, const char* data, size_t len) {
  putU32(b, static_cast<uint32_t>(len));
  b.insert(b.end(), data, data + len);
}

uint32_t toMs(std::chrono::milliseconds t) {
  auto ms = t.count();
  return ms < 0 ? 0 : ms > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ms);
}

// One connect attempt; returns the fd or -1 with errno set.
int tryConnect(const std::string& host, int port) {
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rv = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rv != 0) {
    throw StoreError("cannot resolve store host " + host + ": " + gai_strerror(rv));
  }
  int fd = -1;
  int err = ECONNREFUSED;
  for (auto* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  errno = err;
  return fd;
}

}  // namespace

StoreClient::StoreClient(const std::string& host, int port, const std::string& token,
                         const std::string& prefix, int rank,
                         std::chrono::milliseconds timeout)
    : where_(host + ":" + std::to_string(port)), prefix_(prefix), timeout_(timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // Retried while nothing listens yet, or while the store ends the connection before its verdict
  // (see the store's notes in src/distributed/store/server.ts).
  for (;;) {
    fd_ = tryConnect(host, port);
    if (fd_ < 0) {
      if (errno != ECONNREFUSED || std::chrono::steady_clock::now() >= deadline) {
        throw StoreError("cannot connect to store at " + where_ + ": " + strerror(errno));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto sock = std::chrono::duration_cast<std::chrono::microseconds>(timeout + kSocketSlack);
    struct timeval tv;
    tv.tv_sec = sock.count() / 1000000;
    tv.tv_usec = sock.count() % 1000000;
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    std::string dropped = authenticate(token, rank);
    if (dropped.empty()) return;
    close(fd_);
    fd_ = -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw StoreError("store at " + where_ + " ended every handshake, the last one " + dropped +
                       " (crowded by other connections?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The client side of the handshake (see src/distributed/store/auth.ts): this client proves first, then
// checks the store's proof. Returns "" once both hold, or where the store ended the connection
// before its verdict (worth retrying: a crowded store sheds the oldest handshake); throws when it
// refuses.
std::string StoreClient::authenticate(const std::string& token, int rank) {
  auto transient = [&](auto io) {
    try {
      io();
      return false;
    } catch (const StoreError&) {
      return true;
    }
  };
  auto refuse = [&](const std::string& why) {
    close(fd_);
    fd_ = -1;
    return StoreError("store at " + where_ +
                      " refused the handshake (wrong DTRAIN_TOKEN or protocol version): " + why);
  };
  std::vector<char> hello(kMagic, kMagic + 4);
  hello.push_back(static_cast<char>(kVersion & 0xff));
  hello.push_back(static_cast<char>(kVersion >> 8));
  putU32(hello, static_cast<uint32_t>(rank));
  char head[6];
  if (transient([&] {
        writeAll(hello.data(), hello.size());
        readAll(head, sizeof(head));
      })) {
    return "before its challenge";
  }
  if (memcmp(head, kMagic, 4) != 0) throw refuse("it does not greet as a dtrain store");
  unsigned version = static_cast<uint8_t>(head[4]) | (static_cast<uint8_t>(head[5]) << 8);
  if (version != kVersion) {
    throw refuse("it speaks protocol version " + std::to_string(version) + ", this client " +
                 std::to_string(kVersion));
  }
  char theirs[kNonce];
  if (transient([&] { readAll(theirs, kNonce); })) return "during its challenge";
  char mine[kNonce];
  if (getrandom(mine, kNonce, 0) != static_cast<ssize_t>(kNonce)) {
    std::string why = strerror(errno);
    close(fd_);
    fd_ = -1;
    throw StoreError("cannot draw a nonce: " + why);
  }
  std::string ns(theirs, kNonce), nc(mine, kNonce), rankBytes;
  for (int i = 0; i < 4; i++) {
    rankBytes.push_back(static_cast<char>((static_cast<uint32_t>(rank) >> (8 * i)) & 0xff));
  }
  auto proof = hmacSha256(token, kClientLabel + ns + nc + rankBytes);
  std::string response = nc + std::string(proof.begin(), proof.end());
  char verdict = 0;
  if (transient([&] {
        writeAll(response.data(), response.size());
        readAll(&verdict, 1);
      })) {
    return "before its verdict";
  }
  if (verdict != 1) throw refuse("it did not accept this client's proof");
  char storeProof[kProof];
  if (transient([&] { readAll(storeProof, kProof); })) return "before its proof";
  if (!sameDigest(hmacSha256(token, kServerLabel + nc + ns), storeProof)) {
    throw refuse("it cannot prove that it knows this job's token");
  }
  return "";
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) close(fd_);
}

void StoreClient::writeAll(const void* data, size_t len) {
  auto p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = send(fd_, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw StoreError("write to store at " + where_ + " failed: " + strerror(errno));
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void StoreClient::readAll(void* data, size_t len) {
  auto p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = recv(fd_, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) throw StoreError("store at " + where_ + " closed the connection");
    if (n < 0) throw StoreError("read from store at " + where_ + " failed: " + strerror(errno));
    p += n;
    len -= static_cast<size_t>(n);
  }
}

std::vector<char> StoreClient::request(const std::vector<char>& body, const std::string& what,
                                       std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<char> frame;
  putU32(frame, static_cast<uint32_t>(body.size()));
  frame.insert(frame.end(), body.begin(), body.end());
  writeAll(frame.data(), frame.size());
  unsigned char len[4];
  readAll(len, 4);
  uint32_t n = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<uint32_t>(len[3]) << 24);
  if (n == 0) throw StoreError("store at " + where_ + " sent an empty response");
  std::vector<char> resp(n);
  readAll(resp.data(), n);
  uint8_t status = static_cast<uint8_t>(resp[0]);
  if (status == kStatusTimeout) {
    throw StoreError("store " + what + " timed out after " + std::to_string(timeout.count()) +
                     " ms");
  }
  if (status != kStatusOk) {
    throw StoreError("store " + what + " failed: " +
                     std::string(resp.begin() + 1, resp.end()));
  }
  return std::vector<char>(resp.begin() + 1, resp.end());
}

void StoreClient::set(const std::string& key, const std::vector<char>& data) {
  std::vector<char> body{static_cast<char>(kOpSet)};
  auto k = prefix_ + key;
  putStr(body, k.data(), k.size());
  putStr(body, data.data(), data.size());
  request(body, "set of '" + k + "'", timeout_);
}

std::vector<char> StoreClient::get(const std::string& key) {
  std::vector<char> body{static_cast<char>(kOpGet)};
  auto k = prefix_ + key;
  putStr(body, k.data(), k.size());
  putU32(body, toMs(timeout_));
  auto value = request(body, "get of '" + k + "'", timeout_);
  fetched_[key] = value;
  return value;
}

void StoreClient::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void StoreClient::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  std::vector<char> body{static_cast<char>(kOpWait)};
  putU32(body, static_cast<uint32_t>(keys.size()));
  std::string names;
  for (const auto& key : keys) {
    auto k = prefix_ + key;
    putStr(body, k.data(), k.size());
    names += (names.empty() ? "'" : ", '") + k + "'";
  }
  putU32(body, toMs(timeout));
  request(body, "wait for " + names, timeout);
}

}  // namespace dtrain
