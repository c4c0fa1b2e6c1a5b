/* Every collective, dtype and op against a direct computation: the ranks' inputs folded in rank
 * order, bf16 and f16 rounded after each step, avg the sum divided after (the stand-in's contract,
 * standin.h), compared bit for bit; out of place and in place. */
#include <string.h>

#include <algorithm>
#include <vector>

#include "../../../../csrc/core/half_math.h"
#include "selftest.h"

namespace {

const int kDtypes[] = {ncclUint8, ncclInt32, ncclFloat16, ncclFloat32, ncclBfloat16};
const int kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

size_t size_of(int dtype) {
  return dtype == ncclUint8 ? 1 : dtype == ncclFloat16 || dtype == ncclBfloat16 ? 2 : 4;
}

uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

/* Rank `rank`'s input: floats in [-9.8, 9.8] with fine fractions (so sums of halves round), any
 * i32, any u8. */
std::vector<char> input(int dtype, int rank, size_t count, uint32_t seed) {
  std::vector<char> out(count * size_of(dtype));
  for (size_t i = 0; i < count; i++) {
    uint32_t x = mix(seed * 7919u + static_cast<uint32_t>(rank) * 104729u + static_cast<uint32_t>(i));
    float f = (static_cast<int>(x % 20001u) - 10000) / 1024.0f;
    switch (dtype) {
      case ncclUint8: out[i] = static_cast<char>(x & 0xFF); break;
      case ncclInt32: memcpy(&out[i * 4], &x, 4); break;
      case ncclFloat32: memcpy(&out[i * 4], &f, 4); break;
      case ncclFloat16: { uint16_t h = dt_f32_to_f16(f); memcpy(&out[i * 2], &h, 2); break; }
      case ncclBfloat16: { uint16_t h = dt_f32_to_bf16(f); memcpy(&out[i * 2], &h, 2); break; }
    }
  }
  return out;
}

template <typename T>
T apply_plain(int op, T a, T b) {
  switch (op) {
    case ncclProd: return static_cast<T>(a * b);
    case ncclMax: return a < b ? b : a;
    case ncclMin: return b < a ? b : a;
    default: return static_cast<T>(a + b);
  }
}

/* One element of the reduction of `ins` (one pointer per rank) at index i, into out. */
void reduce_one(int dtype, int op, const std::vector<const char *> &ins, size_t i, char *out) {
  const int n = static_cast<int>(ins.size());
  if (dtype == ncclUint8) {
    uint8_t acc = static_cast<uint8_t>(ins[0][i]);
    for (int r = 1; r < n; r++) acc = apply_plain<uint8_t>(op, acc, static_cast<uint8_t>(ins[r][i]));
    if (op == ncclAvg) acc = static_cast<uint8_t>(acc / n);
    out[i] = static_cast<char>(acc);
  } else if (dtype == ncclInt32) {
    uint32_t acc;
    memcpy(&acc, ins[0] + i * 4, 4);
    for (int r = 1; r < n; r++) {
      uint32_t b;
      memcpy(&b, ins[r] + i * 4, 4);
      if (op == ncclMax || op == ncclMin)
        acc = static_cast<uint32_t>(apply_plain<int32_t>(op, static_cast<int32_t>(acc), static_cast<int32_t>(b)));
      else
        acc = apply_plain<uint32_t>(op, acc, b); /* wraps, as two's complement does */
    }
    if (op == ncclAvg) acc = static_cast<uint32_t>(static_cast<int32_t>(acc) / n);
    memcpy(out + i * 4, &acc, 4);
  } else if (dtype == ncclFloat32) {
    float acc;
    memcpy(&acc, ins[0] + i * 4, 4);
    for (int r = 1; r < n; r++) {
      float b;
      memcpy(&b, ins[r] + i * 4, 4);
      acc = apply_plain<float>(op, acc, b);
    }
    if (op == ncclAvg) acc /= static_cast<float>(n);
    memcpy(out + i * 4, &acc, 4);
  } else {
    const bool bf = dtype == ncclBfloat16;
    auto load = [bf](const char *p) {
      uint16_t h;
      memcpy(&h, p, 2);
      return bf ? dt_bf16_to_f32(h) : dt_f16_to_f32(h);
    };
    auto round = [bf](float f) { return bf ? dt_f32_to_bf16(f) : dt_f32_to_f16(f); };
    uint16_t acc;
    memcpy(&acc, ins[0] + i * 2, 2);
    for (int r = 1; r < n; r++) {
      char a[2];
      memcpy(a, &acc, 2);
      acc = round(apply_plain<float>(op, load(a), load(ins[r] + i * 2)));
    }
    if (op == ncclAvg) {
      char a[2];
      memcpy(a, &acc, 2);
      acc = round(load(a) / static_cast<float>(n));
    }
    memcpy(out + i * 2, &acc, 2);
  }
}

/* The reduction over every rank's `count` elements starting at element `at` of their inputs. */
std::vector<char> expected(int dtype, int op, const std::vector<std::vector<char>> &all, size_t at,
                           size_t count) {
  const size_t es = size_of(dtype);
  std::vector<const char *> ins;
  for (const auto &v : all) ins.push_back(v.data() + at * es);
  std::vector<char> out(count * es);
  for (size_t i = 0; i < count; i++) reduce_one(dtype, op, ins, i, out.data());
  return out;
}

struct Ctx {
  int rank, n;
  void *comm;
  FakeStream *stream;
  void run(int r, const char *what) {
    CHECK(r == ncclSuccess, "%s returned %d: %s", what, r, nccl.last_error(comm));
    CHECK(stream->wait(stream->mark(), 20000), "%s did not finish", what);
    int async = -1;
    nccl.comm_get_async_error(comm, &async);
    CHECK(async == ncclSuccess, "%s: async error %d", what, async);
  }
};

void same(const std::vector<char> &got, const char *want, size_t bytes, const char *what, int dtype,
          int op, size_t count) {
  CHECK(got.size() >= bytes && memcmp(got.data(), want, bytes) == 0,
        "%s dtype %d op %d count %zu: wrong result", what, dtype, op, count);
}

void reductions(Ctx &c) {
  const size_t counts[] = {0, 1, 5, 1000, 4099};
  uint32_t seed = 1;
  for (int dtype : kDtypes) {
    const size_t es = size_of(dtype);
    for (int op : kOps) {
      for (size_t count : counts) {
        seed++;
        std::vector<std::vector<char>> all, all_rs;
        for (int r = 0; r < c.n; r++) {
          all.push_back(input(dtype, r, count, seed));
          all_rs.push_back(input(dtype, r, count * c.n, seed + 1000000));
        }
        /* all-reduce, out of place then in place */
        const std::vector<char> want = expected(dtype, op, all, 0, count);
        std::vector<char> send = all[c.rank], recv(count * es + 1, '\x5a');
        c.run(nccl.all_reduce(send.data(), recv.data(), count, dtype, op, c.comm, c.stream), "ncclAllReduce");
        same(recv, want.data(), want.size(), "allreduce", dtype, op, count);
        CHECK(send == all[c.rank] && recv.back() == '\x5a', "allreduce wrote outside its output");
        c.run(nccl.all_reduce(send.data(), send.data(), count, dtype, op, c.comm, c.stream), "ncclAllReduce");
        same(send, want.data(), want.size(), "allreduce in place", dtype, op, count);
        /* reduce-scatter, out of place then in place (recv = send + rank * count) */
        const std::vector<char> want_rs = expected(dtype, op, all_rs, c.rank * count, count);
        std::vector<char> rs_send = all_rs[c.rank], rs_recv(count * es + 1, '\x5a');
        c.run(nccl.reduce_scatter(rs_send.data(), rs_recv.data(), count, dtype, op, c.comm, c.stream),
              "ncclReduceScatter");
        same(rs_recv, want_rs.data(), want_rs.size(), "reducescatter", dtype, op, count);
        CHECK(rs_send == all_rs[c.rank] && rs_recv.back() == '\x5a', "reducescatter wrote outside");
        char *own = rs_send.data() + c.rank * count * es;
        c.run(nccl.reduce_scatter(rs_send.data(), own, count, dtype, op, c.comm, c.stream), "ncclReduceScatter");
        CHECK(memcmp(own, want_rs.data(), want_rs.size()) == 0,
              "reducescatter in place dtype %d op %d count %zu: wrong result", dtype, op, count);
      }
    }
  }
}

void movers(Ctx &c) {
  const size_t counts[] = {0, 1, 777};
  uint32_t seed = 500;
  for (int dtype : kDtypes) {
    const size_t es = size_of(dtype);
    for (size_t count : counts) {
      seed++;
      const size_t bytes = count * es;
      for (int root = 0; root < c.n; root++) {
        const std::vector<char> want = input(dtype, root, count, seed + root);
        std::vector<char> send = c.rank == root ? want : std::vector<char>(bytes, '\x11');
        std::vector<char> recv(bytes + 1, '\x5a');
        c.run(nccl.broadcast(send.data(), recv.data(), count, dtype, root, c.comm, c.stream), "ncclBroadcast");
        same(recv, want.data(), bytes, "broadcast", dtype, root, count);
        CHECK(recv.back() == '\x5a', "broadcast wrote outside its output");
        std::vector<char> buf = c.rank == root ? want : std::vector<char>(bytes, '\x22');
        c.run(nccl.broadcast(buf.data(), buf.data(), count, dtype, root, c.comm, c.stream), "ncclBroadcast");
        same(buf, want.data(), bytes, "broadcast in place", dtype, root, count);
      }
      std::vector<char> want;
      for (int r = 0; r < c.n; r++) {
        std::vector<char> part = input(dtype, r, count, seed * 3 + r);
        want.insert(want.end(), part.begin(), part.end());
      }
      const std::vector<char> mine(want.begin() + c.rank * bytes, want.begin() + (c.rank + 1) * bytes);
      std::vector<char> recv(c.n * bytes + 1, '\x5a');
      c.run(nccl.all_gather(mine.data(), recv.data(), count, dtype, c.comm, c.stream), "ncclAllGather");
      same(recv, want.data(), want.size(), "allgather", dtype, -1, count);
      CHECK(recv.back() == '\x5a', "allgather wrote outside its output");
      std::vector<char> inplace(c.n * bytes, '\x33');
      std::copy(mine.begin(), mine.end(), inplace.begin() + c.rank * bytes);
      c.run(nccl.all_gather(inplace.data() + c.rank * bytes, inplace.data(), count, dtype, c.comm, c.stream),
            "ncclAllGather");
      same(inplace, want.data(), want.size(), "allgather in place", dtype, -1, count);
    }
  }
}

/* Calls refused on the caller's thread, with nothing queued. */
void refusals(Ctx &c) {
  CHECK(std::string(nccl.last_error(c.comm)).empty(), "a new communicator has a last error");
  int version = 0;
  CHECK(nccl.get_version(&version) == ncclSuccess && version >= 21300, "version %d", version);
  CHECK(std::string(nccl.error_string(ncclRemoteError)) ==
        "remote process exited or there was a network error");
  float x[4] = {1, 2, 3, 4};
  const uint64_t before = c.stream->mark();
  CHECK(nccl.all_reduce(x, x, 4, ncclFloat32, ncclSum, c.comm, nullptr) == ncclInvalidArgument);
  int not_a_stream[4] = {0};
  CHECK(nccl.all_reduce(x, x, 4, ncclFloat32, ncclSum, c.comm, not_a_stream) == ncclInvalidArgument);
  CHECK(nccl.all_reduce(x, x, 4, 3 /* ncclUint32 */, ncclSum, c.comm, c.stream) == ncclInvalidArgument);
  CHECK(nccl.all_reduce(x, x, 4, ncclFloat32, 5, c.comm, c.stream) == ncclInvalidArgument);
  CHECK(nccl.broadcast(x, x, 4, ncclFloat32, c.n, c.comm, c.stream) == ncclInvalidArgument);
  CHECK(nccl.send(x, 4, ncclFloat32, c.rank, c.comm, c.stream) == ncclInvalidArgument);
  CHECK(nccl.recv(nullptr, 4, ncclFloat32, (c.rank + 1) % c.n, c.comm, c.stream) == ncclInvalidArgument);
  CHECK(nccl.all_reduce(x, x, 4, ncclFloat32, ncclSum, nullptr, c.stream) == ncclInvalidArgument);
  CHECK(nccl.group_end() == ncclInvalidUsage);
  CHECK(c.stream->mark() == before, "a refused call was queued");
  CHECK(!std::string(nccl.last_error(c.comm)).empty(), "a refusal left no message");
  int async = -1;
  CHECK(nccl.comm_get_async_error(c.comm, &async) == ncclSuccess && async == ncclSuccess);
}

}  // namespace

int scenario_collectives(int rank, int n, const ncclUniqueId &id) {
  if (rank == 0) {
    ncclUniqueId bad;
    memset(&bad, 0, sizeof bad);
    void *comm = nullptr;
    CHECK(nccl.comm_init_rank(&comm, n, bad, rank) == ncclInvalidArgument, "a bad id was taken");
  }
  void *comm = init_comm(id, rank, n);
  FakeStream *stream = new FakeStream();
  Ctx c{rank, n, comm, stream};
  refusals(c);
  const double t0 = now_ms();
  reductions(c);
  movers(c);
  CHECK(nccl.comm_destroy(comm) == ncclSuccess);
  float x = 1;
  CHECK(nccl.all_reduce(&x, &x, 1, ncclFloat32, ncclSum, comm, stream) == ncclInvalidUsage,
        "a call on a destroyed communicator was taken");
  delete stream;
  fprintf(stderr, "rank %d: collectives took %.0f ms\n", rank, now_ms() - t0);
  return 0;
}
