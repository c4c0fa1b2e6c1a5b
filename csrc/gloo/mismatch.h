// How errors name a collective, and the fingerprint check's message, in one place for the three
// backends that check fingerprints: the Gloo shim, the shared-memory transport (csrc/shm) and the
// NCCL shim (csrc/cuda/nccl.cu, which nvcc compiles into another library, hence a header).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collective_codes.h"

namespace dtrain::collective {

// "allReduce (op #17)": how errors name the collective.
inline std::string opLabel(const dt_fingerprint& fp) {
  return std::string(dt_collective_name(fp.kind)) + " (op #" + std::to_string(fp.seq) + ")";
}

// The first difference between group rank 0's fingerprint and another's among the `n` of `all`,
// worded the same on every rank ("" when all agree), because every rank compares with rank 0.
// `globalRanks` maps group ranks to the job ranks that messages name.
inline std::string mismatchMessage(const std::vector<int>& globalRanks, const dt_fingerprint* all,
                                   size_t n) {
  auto jobRank = [&](int i) {
    return i >= 0 && i < static_cast<int>(globalRanks.size()) ? globalRanks[i] : i;
  };
  auto rankName = [&](int i) { return "rank " + std::to_string(jobRank(i)); };
  const auto& ref = all[0];
  const auto first = rankName(0);
  for (size_t j = 1; j < n; j++) {
    const auto& fp = all[j];
    auto rank = rankName(static_cast<int>(j));
    auto tail = " (op #" + std::to_string(ref.seq) + ")";
    if (fp.kind != ref.kind) {
      return "op #" + std::to_string(ref.seq) + ": " + rank + " called " +
             dt_collective_name(fp.kind) + ", " + first + " called " +
             dt_collective_name(ref.kind);
    }
    std::string name = dt_collective_name(ref.kind);
    if (fp.count != ref.count || fp.dtype != ref.dtype) {
      return name + ": " + rank + " sent " + std::to_string(fp.count) + " " +
             dt_dtype_name(fp.dtype) + " elements, " + first + " expected " +
             std::to_string(ref.count) +
             (fp.dtype != ref.dtype ? std::string(" ") + dt_dtype_name(ref.dtype) + " elements"
                                    : "") +
             tail;
    }
    if (fp.op != ref.op) {
      return name + ": " + rank + " reduces with " + dt_reduce_op_name(fp.op) + ", " + first +
             " expected " + dt_reduce_op_name(ref.op) + tail;
    }
    if (fp.root != ref.root) {
      return name + ": " + rank + " uses root " + std::to_string(jobRank(fp.root)) + ", " +
             first + " expected root " + std::to_string(jobRank(ref.root)) + tail;
    }
  }
  return "";
}

}  // namespace dtrain::collective
