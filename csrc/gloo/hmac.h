// HMAC-SHA256 (RFC 2104, FIPS 180-4) for the store handshake's proofs; see src/distributed/store/auth.ts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dtrain {

using Digest = std::array<uint8_t, 32>;

// HMAC-SHA256 of `msg` under `key`.
Digest hmacSha256(const std::string& key, const std::string& msg);

// Whether the 32 bytes at `theirs` equal `mine`, in time independent of where they differ
// (a proof is a secret until checked).
bool sameDigest(const Digest& mine, const char* theirs);

}  // namespace dtrain
