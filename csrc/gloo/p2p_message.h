// The header every point-to-point message starts with, and the mismatch message, in one place
// for the backends that check them: Gloo (p2p.cc) and shared memory (csrc/shm/p2p.cc).
//
// [Note: point-to-point protocol]
// Messages between two ranks are matched in the order each side posts them (a send's n-th
// message to a peer is that peer's n-th receive from it), as NCCL matches them; the tag is
// checked, not used to reorder. The sender sends a header (dtype, bytes, shape, tag); the receiver
// compares it with what it expects and answers with a verdict carrying its own header. A mismatch
// therefore fails both sides with the same message, naming both ranks and both tags, and leaves
// nothing half-received: the pair stays usable. A send completes once the receiver has accepted
// its header and the payload has left. Over shared memory the payload follows the verdict. Over
// Gloo a payload of up to 32 KiB goes right behind the header, into a staging buffer the receiver
// posted ahead, while the header waits its verdict: a message is one trip, and the verdict travels
// back while the receiver already works (a mismatched payload is dropped). A larger payload still
// waits for the verdict and lands in place (p2p.cc, p2p_stage.h).
#pragma once

#include <cstdint>
#include <string>

#include "collective_codes.h"

namespace dtrain::p2p {

using namespace dtrain::collective;

constexpr uint32_t kMagic = 0x70327064;  // "dp2p"
constexpr int kMaxDims = 8;

enum Kind { kSend = DT_P2P_SEND, kRecv = DT_P2P_RECV };

struct Header {
  uint32_t magic;
  int32_t dtype;
  uint32_t tag;
  uint32_t ndim;  // entries of dims used; a tensor of more dims is described flat
  uint64_t nbytes;
  uint64_t seq;   // the message's number between the two ranks, in this direction
  int64_t dims[kMaxDims];
  int32_t ok;     // in a verdict: 1 when the receiver accepted the header
  int32_t reserved;
};
static_assert(sizeof(Header) == 104, "the header travels as raw bytes");

inline Header makeHeader(int dtype, uint32_t tag, uint64_t count, uint64_t nbytes,
                         const int64_t* dims, uint32_t ndim) {
  Header h{};
  h.magic = kMagic;
  h.dtype = dtype;
  h.tag = tag;
  h.nbytes = nbytes;
  if (dims == nullptr || ndim > kMaxDims) {
    h.ndim = 1;
    h.dims[0] = static_cast<int64_t>(count);
  } else {
    h.ndim = ndim;
    for (uint32_t i = 0; i < ndim; i++) h.dims[i] = dims[i];
  }
  return h;
}

inline bool sameMessage(const Header& a, const Header& b) {
  if (a.magic != kMagic || b.magic != kMagic) return false;
  if (a.dtype != b.dtype || a.tag != b.tag || a.nbytes != b.nbytes || a.ndim != b.ndim) {
    return false;
  }
  for (uint32_t i = 0; i < a.ndim && i < kMaxDims; i++) {
    if (a.dims[i] != b.dims[i]) return false;
  }
  return true;
}

inline std::string describe(const Header& h) {
  std::string s = std::string(dt_dtype_name(h.dtype)) + " [";
  for (uint32_t i = 0; i < h.ndim && i < kMaxDims; i++) {
    s += (i ? ", " : "") + std::to_string(h.dims[i]);
  }
  return s + "] (" + std::to_string(h.nbytes) + " bytes)";
}

// "recv from rank 0" / "send to rank 1", with the tag: how errors name one side of a message.
inline std::string opName(int kind, int peerJobRank, uint32_t tag) {
  return std::string(kind == kSend ? "send to rank " : "recv from rank ") +
         std::to_string(peerJobRank) + " (tag " + std::to_string(tag) + ")";
}

// The same words on both sides: the sender's header against the receiver's.
inline std::string mismatchMessage(int senderJobRank, int receiverJobRank, const Header& sent,
                                   const Header& expected) {
  if (sent.magic != kMagic) {
    return "p2p message #" + std::to_string(expected.seq) + " from rank " +
           std::to_string(senderJobRank) + " to rank " + std::to_string(receiverJobRank) +
           ": not a dtrain point-to-point header (the ranks' calls are out of step)";
  }
  return "p2p message #" + std::to_string(sent.seq) + " from rank " +
         std::to_string(senderJobRank) + " to rank " + std::to_string(receiverJobRank) +
         ": rank " + std::to_string(senderJobRank) + " sends tag " + std::to_string(sent.tag) +
         " " + describe(sent) + ", rank " + std::to_string(receiverJobRank) +
         " receives tag " + std::to_string(expected.tag) + " " + describe(expected);
}

}  // namespace dtrain::p2p
