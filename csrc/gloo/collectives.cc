// The five collectives of the C ABI on raw pointers: argument checks, then the first-message
// exchange (fingerprint.cc), then the payload inline, through Gloo, or by ring reduce-scatter.
// The all-gather is also started on a thread of its own (work.cc).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <string.h>

#include "fingerprint.h"
#include "ring_reduce_scatter.h"

using namespace dtrain;

namespace {

void checkDtype(const char* what, int dtype) {
  if (dtypeSize(dtype) == 0) {
    throw Failure(DT_EINVAL, std::string(what) + ": unknown dtype code " + std::to_string(dtype));
  }
}

ReduceFn checkReduce(const char* what, int dtype, int op) {
  checkDtype(what, dtype);
  if (op == DT_AVG && !isFloatDtype(dtype)) {
    throw Failure(DT_EINVAL, std::string(what) +
                                 ": op avg needs a floating-point dtype (f32, bf16, f16), got " +
                                 dt_dtype_name(dtype));
  }
  auto fn = reduceFn(dtype, op);
  if (fn == nullptr) {
    throw Failure(DT_EINVAL, std::string(what) + ": unknown reduce op code " + std::to_string(op));
  }
  return fn;
}

void checkPointer(const char* what, const void* ptr, uint64_t count) {
  if (ptr == nullptr && count > 0) throw Failure(DT_EINVAL, std::string(what) + ": null buffer");
}

// Gloo's option setters are typed by element size only: bytes for the collectives that only
// move data, and for all-reduce (whose reduce function takes element counts) a type of the
// dtype's size, whatever it holds: f32 and i32 as float, bf16 and f16 as uint16_t.
template <typename F>
void withElem(int dtype, F f) {
  if (dtypeSize(dtype) == 2) {
    f(uint16_t{});
  } else {
    f(float{});
  }
}

}  // namespace

namespace dtrain {

void checkAllGather(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype,
                    void* const* outs, uint64_t nouts) {
  checkDtype("allGather", dtype);
  checkPointer("allGather", in, count);
  const uint64_t n = ctx->gloo ? static_cast<uint64_t>(ctx->gloo->size) : 0;
  if (outs == nullptr || (nouts != 1 && nouts != n)) {
    throw Failure(DT_EINVAL, "allGather: expected 1 flat output or " + std::to_string(n) +
                                 " outputs, got " + std::to_string(nouts));
  }
  for (uint64_t i = 0; i < nouts; i++) checkPointer("allGather", outs[i], count);
}

void allGather(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype, void* const* outs,
               uint64_t nouts) {
  checkAllGather(ctx, in, count, dtype, outs, nouts);
  const uint64_t n = ctx->gloo ? static_cast<uint64_t>(ctx->gloo->size) : 0;
  const size_t bytes = count * dtypeSize(dtype);
  const bool inlined = bytes <= ctx->inline_bytes;
  Outgoing out;
  if (inlined) {
    out.bytes = bytes;
    out.fill = [&](char* dst, int) { memcpy(dst, in, bytes); };
  }
  // Where rank r's contribution goes.
  auto slice = [&](uint64_t r) {
    return nouts == 1 ? static_cast<char*>(outs[0]) + r * bytes : static_cast<char*>(outs[r]);
  };
  runCollective(ctx, {0, count, DT_ALLGATHER, dtype, -1, -1}, out, [&] {
    if (count == 0) return;
    const int me = ctx->gloo->rank;
    if (n == 1 || inlined) {
      for (uint64_t r = 0; r < n; r++) {
        const char* src = static_cast<int>(r) == me ? static_cast<const char*>(in)
                                                    : inboxOf(ctx, r) + kHeader;
        memmove(slice(r), src, bytes);
      }
      return;
    }
    std::vector<char> staging(nouts == 1 ? 0 : n * bytes);
    char* flat = nouts == 1 ? static_cast<char*>(outs[0]) : staging.data();
    gloo::AllgatherOptions opts(ctx->gloo);
    opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
    opts.setOutput(flat, n * bytes);
    opts.setTag(static_cast<uint32_t>(ctx->seq));
    opts.setTimeout(ctx->timeout);
    gloo::allgather(opts);
    if (nouts != 1) {
      for (uint64_t r = 0; r < n; r++) memcpy(slice(r), flat + r * bytes, bytes);
    }
  });
}

}  // namespace dtrain

extern "C" {

int dt_gloo_allreduce(dt_gloo_ctx* ctx, void* buf, uint64_t count, int dtype, int op) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return guard(ctx, [&] {
    auto fn = checkReduce("allReduce", dtype, op);
    checkPointer("allReduce", buf, count);
    const size_t bytes = count * dtypeSize(dtype);
    const bool inlined = bytes <= ctx->inline_bytes;
    Outgoing out;
    if (inlined) {
      out.bytes = bytes;
      out.fill = [&](char* dst, int) { memcpy(dst, buf, bytes); };
    }
    runCollective(ctx, {0, count, DT_ALLREDUCE, dtype, op, -1}, out, [&] {
      const int n = ctx->gloo->size;
      if (count == 0) return;
      if (n > 1 && inlined) {
        // Reduce in rank order so that every rank computes bitwise the same result; this
        // rank's own input is read from its staged copy since `buf` is the accumulator.
        const int me = ctx->gloo->rank;
        auto input = [&](int r) -> const void* {
          return r == me ? stageOf(ctx, 0) + kHeader : inboxOf(ctx, r) + kHeader;
        };
        fn(buf, input(0), input(1), count);
        for (int r = 2; r < n; r++) fn(buf, buf, input(r), count);
      } else if (n > 1) {
        gloo::AllreduceOptions opts(ctx->gloo);
        withElem(dtype,
                 [&](auto elem) { opts.setOutput(static_cast<decltype(elem)*>(buf), count); });
        opts.setReduceFunction(fn);
        opts.setTag(static_cast<uint32_t>(ctx->seq));
        opts.setTimeout(ctx->timeout);
        gloo::allreduce(opts);
      }
      if (op == DT_AVG) divideInPlace(buf, count, dtype, n);
    });
  });
}

int dt_gloo_broadcast(dt_gloo_ctx* ctx, void* buf, uint64_t count, int dtype, int root) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return guard(ctx, [&] {
    checkDtype("broadcast", dtype);
    checkPointer("broadcast", buf, count);
    if (ctx->gloo && (root < 0 || root >= ctx->gloo->size)) {
      throw Failure(DT_EINVAL, "broadcast: root " + std::to_string(root) +
                                   " is outside world size " + std::to_string(ctx->gloo->size));
    }
    const size_t bytes = count * dtypeSize(dtype);
    const bool inlined = bytes <= ctx->inline_bytes;
    Outgoing out;
    if (inlined && ctx->gloo && ctx->gloo->rank == root) {
      out.bytes = bytes;
      out.fill = [&](char* dst, int) { memcpy(dst, buf, bytes); };
    }
    runCollective(ctx, {0, count, DT_BROADCAST, dtype, -1, root}, out, [&] {
      if (count == 0 || ctx->gloo->size == 1) return;
      if (inlined) {
        if (ctx->gloo->rank != root) memcpy(buf, inboxOf(ctx, root) + kHeader, bytes);
        return;
      }
      gloo::BroadcastOptions opts(ctx->gloo);
      opts.setOutput(static_cast<char*>(buf), bytes);
      opts.setRoot(root);
      opts.setTag(static_cast<uint32_t>(ctx->seq));
      opts.setTimeout(ctx->timeout);
      gloo::broadcast(opts);
    });
  });
}

int dt_gloo_allgather(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype,
                      void* const* outs, uint64_t nouts) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return guard(ctx, [&] { allGather(ctx, in, count, dtype, outs, nouts); });
}

int dt_gloo_reduce_scatter(dt_gloo_ctx* ctx, void* out, const void* in, uint64_t out_count,
                           int dtype, int op) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  return guard(ctx, [&] {
    auto fn = checkReduce("reduceScatter", dtype, op);
    checkPointer("reduceScatter", out, out_count);
    checkPointer("reduceScatter", in, out_count);
    const uint64_t n = ctx->gloo ? static_cast<uint64_t>(ctx->gloo->size) : 0;
    const size_t bytes = out_count * dtypeSize(dtype);
    auto o = static_cast<const char*>(out);
    auto i = static_cast<const char*>(in);
    if (out_count > 0 && o < i + n * bytes && i < o + bytes) {
      throw Failure(DT_EINVAL, "reduceScatter: output overlaps input");
    }
    const bool inlined = bytes <= ctx->inline_bytes;
    Outgoing msg;
    if (inlined) {
      msg.bytes = bytes;
      msg.perPeer = true;
      msg.fill = [&](char* dst, int peer) { memcpy(dst, i + peer * bytes, bytes); };
    }
    runCollective(ctx, {0, n * out_count, DT_REDUCE_SCATTER, dtype, op, -1}, msg, [&] {
      if (out_count == 0) return;
      const int me = ctx->gloo->rank;
      if (n == 1) {
        memcpy(out, in, bytes);
      } else if (inlined) {
        // Every peer sent us its chunk `me`; reduce them in rank order.
        auto chunk = [&](int r) -> const void* {
          return r == me ? i + me * bytes : inboxOf(ctx, r) + kHeader;
        };
        fn(out, chunk(0), chunk(1), out_count);
        for (int r = 2; r < static_cast<int>(n); r++) fn(out, out, chunk(r), out_count);
      } else {
        ringReduceScatter(ctx, out, in, out_count, dtypeSize(dtype), fn);
      }
      if (op == DT_AVG) divideInPlace(out, out_count, dtype, n);
    });
  });
}

int dt_gloo_barrier(dt_gloo_ctx* ctx) {
  if (ctx == nullptr) return DT_EINVAL;
  std::lock_guard<std::mutex> lock(ctx->call_mu);
  // The first-message exchange is all-to-all: finishing it means every rank arrived.
  return guard(ctx, [&] { runCollective(ctx, {0, 0, DT_BARRIER, -1, -1, -1}, {}, [] {}); });
}

}  // extern "C"
