// The five collectives of the shared-memory C ABI: argument checks, then runPhases with what
// each rank stages and how it reads the others' slots.
#include <string.h>

#include <algorithm>

#include "internal.h"

using namespace dtrain;
using namespace dtrain::shm;

namespace {

ReduceFn checkReduce(const char* what, int dtype, int op) {
  if (dtypeSize(dtype) == 0) {
    throw Failure(DT_EINVAL, std::string(what) + ": unknown dtype code " + std::to_string(dtype));
  }
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

void checkBuffer(const char* what, const void* ptr, uint64_t count, int dtype) {
  if (dtypeSize(dtype) == 0) {
    throw Failure(DT_EINVAL, std::string(what) + ": unknown dtype code " + std::to_string(dtype));
  }
  if (ptr == nullptr && count > 0) throw Failure(DT_EINVAL, std::string(what) + ": null buffer");
}

}  // namespace

namespace dtrain::shm {

void reduceInRankOrder(dt_shm_ctx* ctx, ReduceFn fn, int op, char* out, size_t bytes, int dtype,
                       const std::function<const char*(int)>& src) {
  const size_t n = bytes / dtypeSize(dtype);
  if (ctx->size == 1) {
    memcpy(out, src(0), bytes);
  } else {
    fn(out, src(0), src(1), n);
    for (int r = 2; r < ctx->size; r++) fn(out, out, src(r), n);
  }
  if (op == DT_AVG) divideInPlace(out, n, dtype, ctx->size);
}

void allGather(dt_shm_ctx* ctx, const void* in, uint64_t count, int dtype, void* const* outs,
               uint64_t nouts) {
  checkBuffer("allGather", in, count, dtype);
  const uint64_t n = static_cast<uint64_t>(ctx->size);
  if (outs == nullptr || (nouts != 1 && nouts != n)) {
    throw Failure(DT_EINVAL, "allGather: expected 1 flat output or " + std::to_string(n) +
                                 " outputs, got " + std::to_string(nouts));
  }
  for (uint64_t i = 0; i < nouts; i++) checkBuffer("allGather", outs[i], count, dtype);
  const size_t bytes = count * dtypeSize(dtype);
  auto src = static_cast<const char*>(in);
  auto dst = [&](uint64_t r) {
    return nouts == 1 ? static_cast<char*>(outs[0]) + r * bytes : static_cast<char*>(outs[r]);
  };
  runPhases(
      ctx, {0, count, DT_ALLGATHER, dtype, -1, -1}, bytes,
      [&](char* slot, size_t off, size_t len) { memcpy(slot, src + off, len); },
      [&](size_t off, size_t len, uint64_t chunk) {
        for (uint64_t r = 0; r < n; r++) memcpy(dst(r) + off, ctx->slot(r, chunk), len);
      });
}

void allReduce(dt_shm_ctx* ctx, void* buf, uint64_t count, int dtype, int op) {
  auto fn = checkReduce("allReduce", dtype, op);
  checkBuffer("allReduce", buf, count, dtype);
  const size_t elem = dtypeSize(dtype);
  size_t offset = 0;
  // Small reductions stage instead: their one synchronisation costs less than the copy in place
  // saves, and the in-place path waits twice (every rank sees the same size, so every rank picks
  // the same path).
  auto shared = count * elem >= kInPlaceMinBytes ? findShared(ctx, buf, count * elem, &offset)
                                                 : nullptr;
  if (shared) {
    allReduceShared(ctx, *shared, offset, count, dtype, op, fn);
    return;
  }
  auto data = static_cast<char*>(buf);
  runPhases(
      ctx, {0, count, DT_ALLREDUCE, dtype, op, -1}, count * elem,
      [&](char* slot, size_t off, size_t len) { memcpy(slot, data + off, len); },
      [&](size_t off, size_t len, uint64_t chunk) {
        reduceInRankOrder(ctx, fn, op, data + off, len, dtype,
                          [&](int r) { return ctx->slot(r, chunk); });
      });
}

void broadcast(dt_shm_ctx* ctx, void* buf, uint64_t count, int dtype, int root) {
  checkBuffer("broadcast", buf, count, dtype);
  if (root < 0 || root >= ctx->size) {
    throw Failure(DT_EINVAL, "broadcast: root " + std::to_string(root) +
                                 " is outside group size " + std::to_string(ctx->size));
  }
  auto data = static_cast<char*>(buf);
  const bool mine = ctx->rank == root;
  runPhases(
      ctx, {0, count, DT_BROADCAST, dtype, -1, root}, count * dtypeSize(dtype),
      [&](char* slot, size_t off, size_t len) {
        if (mine) memcpy(slot, data + off, len);
      },
      [&](size_t off, size_t len, uint64_t chunk) {
        if (!mine) memcpy(data + off, ctx->slot(root, chunk), len);
      });
}

void reduceScatter(dt_shm_ctx* ctx, void* out, const void* in, uint64_t out_count, int dtype,
                   int op) {
  auto fn = checkReduce("reduceScatter", dtype, op);
  checkBuffer("reduceScatter", out, out_count, dtype);
  checkBuffer("reduceScatter", in, out_count, dtype);
  const uint64_t n = static_cast<uint64_t>(ctx->size);
  const size_t elem = dtypeSize(dtype);
  const size_t bytes = out_count * elem;
  auto o = static_cast<char*>(out);
  auto i = static_cast<const char*>(in);
  if (out_count > 0 && o < i + n * bytes && i < o + bytes) {
    throw Failure(DT_EINVAL, "reduceScatter: output overlaps input");
  }
  // Every rank stages its whole input; this rank reduces the part of each chunk that falls
  // in its own output range [mine, mine + bytes).
  const size_t mine = ctx->rank * bytes;
  runPhases(
      ctx, {0, n * out_count, DT_REDUCE_SCATTER, dtype, op, -1}, n * bytes,
      [&](char* slot, size_t off, size_t len) { memcpy(slot, i + off, len); },
      [&](size_t off, size_t len, uint64_t chunk) {
        const size_t lo = std::max(off, mine), hi = std::min(off + len, mine + bytes);
        if (lo >= hi) return;
        char* dst = o + (lo - mine);
        reduceInRankOrder(ctx, fn, op, dst, hi - lo, dtype,
                          [&](int r) { return ctx->slot(r, chunk) + (lo - off); });
      });
}

}  // namespace dtrain::shm

extern "C" {

int dt_shm_allreduce(dt_shm_ctx* ctx, uint64_t ticket, void* buf, uint64_t count, int dtype,
                     int op, double* timing) {
  if (ctx == nullptr) return DT_EINVAL;
  return serve(ctx, ticket, timing, [&] { allReduce(ctx, buf, count, dtype, op); });
}

int dt_shm_allreduce_blocking(dt_shm_ctx* ctx, void* buf, uint64_t count, int dtype, int op,
                              double* timing) {
  if (ctx == nullptr) return DT_EINVAL;
  return serveWhenIdle(ctx, "allReduce", [&] { allReduce(ctx, buf, count, dtype, op); }, timing);
}

int dt_shm_broadcast(dt_shm_ctx* ctx, uint64_t ticket, void* buf, uint64_t count, int dtype,
                     int root, double* timing) {
  if (ctx == nullptr) return DT_EINVAL;
  return serve(ctx, ticket, timing, [&] { broadcast(ctx, buf, count, dtype, root); });
}

int dt_shm_broadcast_blocking(dt_shm_ctx* ctx, void* buf, uint64_t count, int dtype, int root) {
  if (ctx == nullptr) return DT_EINVAL;
  return serveWhenIdle(ctx, "broadcast", [&] { broadcast(ctx, buf, count, dtype, root); });
}

int dt_shm_allgather(dt_shm_ctx* ctx, uint64_t ticket, const void* in, uint64_t count,
                     int dtype, void* const* outs, uint64_t nouts, double* timing) {
  if (ctx == nullptr) return DT_EINVAL;
  return serve(ctx, ticket, timing, [&] { allGather(ctx, in, count, dtype, outs, nouts); });
}

int dt_shm_allgather_blocking(dt_shm_ctx* ctx, const void* in, uint64_t count, int dtype,
                              void* const* outs, uint64_t nouts) {
  if (ctx == nullptr) return DT_EINVAL;
  return serveWhenIdle(ctx, "allGather",
                       [&] { allGather(ctx, in, count, dtype, outs, nouts); });
}

int dt_shm_reduce_scatter(dt_shm_ctx* ctx, uint64_t ticket, void* out, const void* in,
                          uint64_t out_count, int dtype, int op, double* timing) {
  if (ctx == nullptr) return DT_EINVAL;
  return serve(ctx, ticket, timing,
               [&] { reduceScatter(ctx, out, in, out_count, dtype, op); });
}

int dt_shm_reduce_scatter_blocking(dt_shm_ctx* ctx, void* out, const void* in,
                                   uint64_t out_count, int dtype, int op, double* timing) {
  if (ctx == nullptr) return DT_EINVAL;
  return serveWhenIdle(ctx, "reduceScatter",
                       [&] { reduceScatter(ctx, out, in, out_count, dtype, op); }, timing);
}

int dt_shm_barrier(dt_shm_ctx* ctx, uint64_t ticket, double* timing) {
  if (ctx == nullptr) return DT_EINVAL;
  return serve(ctx, ticket, timing, [&] {
    runPhases(ctx, {0, 0, DT_BARRIER, -1, -1, -1}, 0, nullptr, nullptr);
  });
}

}  // extern "C"
