/* Groups and point-to-point messages: dtrain's all-gather into separate buffers (a broadcast from
 * every root in one group), batches of sends and receives to every peer in both directions at once
 * (large enough that a unit waiting for one transfer before posting the next would deadlock), the
 * order of messages between two ranks, a group mixing collectives and messages, nesting, and a
 * group whose call was refused. */
#include <string.h>

#include <vector>

#include "selftest.h"

namespace {

/* Element i of the k-th message from rank `from` to rank `to`. */
int32_t word(int from, int to, int k, size_t i) {
  return static_cast<int32_t>(from * 1000003 + to * 10007 + k * 101 + static_cast<int32_t>(i));
}

std::vector<int32_t> message(int from, int to, int k, size_t count) {
  std::vector<int32_t> m(count);
  for (size_t i = 0; i < count; i++) m[i] = word(from, to, k, i);
  return m;
}

struct Ctx {
  int rank, n;
  void *comm;
  FakeStream *stream;
  /* Waits for what was queued, and checks nothing failed. */
  void finish(const char *what) {
    CHECK(stream->wait(stream->mark(), 30000), "%s did not finish", what);
    int async = -1;
    nccl.comm_get_async_error(comm, &async);
    CHECK(async == ncclSuccess, "%s: async error %d: %s", what, async, nccl.last_error(comm));
  }
  void ok(int r, const char *what) { CHECK(r == ncclSuccess, "%s returned %d", what, r); }
};

/* dt_nccl_allgather with one output per rank (csrc/cuda/nccl.cu gather_by_broadcasts). */
void broadcast_group(Ctx &c) {
  const size_t count = 513;
  std::vector<int32_t> in = message(c.rank, 0, 7, count);
  std::vector<std::vector<int32_t>> outs(c.n, std::vector<int32_t>(count, -1));
  const uint64_t before = c.stream->mark();
  c.ok(nccl.group_start(), "ncclGroupStart");
  for (int r = 0; r < c.n; r++)
    c.ok(nccl.broadcast(in.data(), outs[r].data(), count, ncclInt32, r, c.comm, c.stream), "ncclBroadcast");
  CHECK(c.stream->mark() == before, "a call inside a group was queued before its end");
  c.ok(nccl.group_end(), "ncclGroupEnd");
  CHECK(c.stream->mark() == before + 1, "a group is not one unit of work");
  c.finish("group of broadcasts");
  for (int r = 0; r < c.n; r++) CHECK(outs[r] == message(r, 0, 7, count), "broadcast from root %d", r);
}

/* Two messages to and from every peer in one group; the large one is 4 MB. Even ranks post their
 * receives first, odd ranks their sends. */
void all_to_all(Ctx &c) {
  const size_t sizes[] = {100, size_t(1) << 20};
  std::vector<std::vector<int32_t>> out, in;
  for (int p = 0; p < c.n; p++)
    for (int k = 0; k < 2; k++) {
      out.push_back(message(c.rank, p, k, sizes[k]));
      in.push_back(std::vector<int32_t>(sizes[k], -1));
    }
  c.ok(nccl.group_start(), "ncclGroupStart");
  for (int pass = 0; pass < 2; pass++) {
    const bool sends = (pass == 0) == (c.rank % 2 == 1);
    for (int p = 0; p < c.n; p++) {
      if (p == c.rank) continue;
      for (int k = 0; k < 2; k++) {
        auto &buf = sends ? out[p * 2 + k] : in[p * 2 + k];
        c.ok(sends ? nccl.send(buf.data(), buf.size(), ncclInt32, p, c.comm, c.stream)
                   : nccl.recv(buf.data(), buf.size(), ncclInt32, p, c.comm, c.stream),
             sends ? "ncclSend" : "ncclRecv");
      }
    }
  }
  c.ok(nccl.group_end(), "ncclGroupEnd");
  c.finish("all-to-all batch");
  for (int p = 0; p < c.n; p++)
    for (int k = 0; k < 2; k++)
      if (p != c.rank)
        CHECK(in[p * 2 + k] == message(p, c.rank, k, sizes[k]), "message %d from rank %d", k, p);
}

/* Both neighbours at once, 2 MB each way, and a zero-byte message. */
void ring(Ctx &c) {
  const size_t count = size_t(1) << 19;
  const int right = (c.rank + 1) % c.n, left = (c.rank + c.n - 1) % c.n;
  std::vector<int32_t> to_right = message(c.rank, right, 3, count), to_left = message(c.rank, left, 4, count);
  std::vector<int32_t> from_left(count, -1), from_right(count, -1);
  c.ok(nccl.group_start(), "ncclGroupStart");
  c.ok(nccl.send(to_right.data(), count, ncclInt32, right, c.comm, c.stream), "ncclSend");
  c.ok(nccl.send(to_left.data(), count, ncclInt32, left, c.comm, c.stream), "ncclSend");
  c.ok(nccl.recv(from_left.data(), count, ncclInt32, left, c.comm, c.stream), "ncclRecv");
  c.ok(nccl.recv(from_right.data(), count, ncclInt32, right, c.comm, c.stream), "ncclRecv");
  c.ok(nccl.send(nullptr, 0, ncclInt32, right, c.comm, c.stream), "ncclSend");
  c.ok(nccl.recv(nullptr, 0, ncclInt32, left, c.comm, c.stream), "ncclRecv");
  c.ok(nccl.group_end(), "ncclGroupEnd");
  c.finish("ring");
  CHECK(from_left == message(left, c.rank, 3, count) && from_right == message(right, c.rank, 4, count),
        "ring messages");
}

/* Rank 0 sends three messages to rank 1 outside any group, each its own unit; rank 1 receives
 * them in order, also one call each. */
void ordered(Ctx &c) {
  const size_t counts[] = {10, 3000, 10};
  if (c.rank == 0) {
    std::vector<std::vector<int32_t>> out;
    for (int k = 0; k < 3; k++) out.push_back(message(0, 1, 20 + k, counts[k]));
    for (int k = 0; k < 3; k++)
      c.ok(nccl.send(out[k].data(), counts[k], ncclInt32, 1, c.comm, c.stream), "ncclSend");
    c.finish("ordered sends");
  } else if (c.rank == 1) {
    std::vector<std::vector<int32_t>> in;
    for (int k = 0; k < 3; k++) in.push_back(std::vector<int32_t>(counts[k], -1));
    for (int k = 0; k < 3; k++)
      c.ok(nccl.recv(in[k].data(), counts[k], ncclInt32, 0, c.comm, c.stream), "ncclRecv");
    c.finish("ordered receives");
    for (int k = 0; k < 3; k++) CHECK(in[k] == message(0, 1, 20 + k, counts[k]), "message %d", k);
  }
}

/* An all-reduce, a broadcast and a ring exchange in one (nested) group. */
void mixed(Ctx &c) {
  const size_t count = 1000;
  std::vector<float> sum(count);
  for (size_t i = 0; i < count; i++) sum[i] = static_cast<float>(c.rank + 1) * static_cast<float>(i);
  std::vector<int32_t> b = c.rank == 1 ? message(1, 0, 9, count) : std::vector<int32_t>(count, -1);
  const int right = (c.rank + 1) % c.n, left = (c.rank + c.n - 1) % c.n;
  std::vector<int32_t> out = message(c.rank, right, 11, count), in(count, -1);
  const uint64_t before = c.stream->mark();
  c.ok(nccl.group_start(), "ncclGroupStart");
  c.ok(nccl.all_reduce(sum.data(), sum.data(), count, ncclFloat32, ncclSum, c.comm, c.stream), "ncclAllReduce");
  c.ok(nccl.group_start(), "ncclGroupStart");
  c.ok(nccl.recv(in.data(), count, ncclInt32, left, c.comm, c.stream), "ncclRecv");
  c.ok(nccl.broadcast(b.data(), b.data(), count, ncclInt32, 1, c.comm, c.stream), "ncclBroadcast");
  c.ok(nccl.send(out.data(), count, ncclInt32, right, c.comm, c.stream), "ncclSend");
  c.ok(nccl.group_end(), "ncclGroupEnd");
  CHECK(c.stream->mark() == before, "an inner ncclGroupEnd queued work");
  c.ok(nccl.group_end(), "ncclGroupEnd");
  CHECK(c.stream->mark() == before + 1, "a nested group is not one unit of work");
  c.finish("mixed group");
  const float ranks = static_cast<float>(c.n * (c.n + 1) / 2);
  for (size_t i = 0; i < count; i++) CHECK(sum[i] == ranks * static_cast<float>(i), "sum[%zu]", i);
  CHECK(b == message(1, 0, 9, count) && in == message(left, c.rank, 11, count), "mixed group data");
}

/* A refused call fails the whole group: nothing of it runs, on any rank, and the next collective
 * still meets its peers. */
void refused_group(Ctx &c) {
  std::vector<float> x(16, 1.0f);
  const uint64_t before = c.stream->mark();
  c.ok(nccl.group_start(), "ncclGroupStart");
  c.ok(nccl.all_reduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, c.comm, c.stream), "ncclAllReduce");
  CHECK(nccl.broadcast(x.data(), x.data(), x.size(), ncclFloat32, c.n, c.comm, c.stream) == ncclInvalidArgument);
  CHECK(nccl.group_end() == ncclInvalidArgument, "the group's end did not report the refusal");
  CHECK(c.stream->mark() == before, "a refused group was queued");
  c.ok(nccl.all_reduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, c.comm, c.stream), "ncclAllReduce");
  c.finish("all-reduce after a refused group");
  CHECK(x[0] == static_cast<float>(c.n) && x[15] == static_cast<float>(c.n), "x = %g", x[0]);
}

/* A second communicator of the same ranks, on a stream of its own, busy at the same time as the
 * first (dtrain makes one per process group): neither's traffic reaches the other. */
void two_comms(Ctx &c) {
  void *comm2 = init_comm(g_second_id, c.rank, c.n);
  FakeStream *stream2 = new FakeStream();
  const size_t count = 100000;
  std::vector<int32_t> a(count, c.rank + 1), b(count, 10 * (c.rank + 1));
  for (int k = 0; k < 5; k++) {
    c.ok(nccl.all_reduce(a.data(), a.data(), count, ncclInt32, ncclSum, c.comm, c.stream), "ncclAllReduce");
    c.ok(nccl.all_reduce(b.data(), b.data(), count, ncclInt32, ncclMax, comm2, stream2), "ncclAllReduce");
  }
  c.finish("first communicator");
  CHECK(stream2->wait(stream2->mark(), 30000), "second communicator");
  int32_t sum = c.n * (c.n + 1) / 2;
  for (int k = 1; k < 5; k++) sum *= c.n;
  CHECK(a[0] == sum && a[count - 1] == sum, "a = %d, want %d", a[0], sum);
  CHECK(b[0] == 10 * c.n && b[count - 1] == 10 * c.n, "b = %d", b[0]);
  CHECK(nccl.comm_destroy(comm2) == ncclSuccess);
  delete stream2;
}

}  // namespace

int scenario_groups(int rank, int n, const ncclUniqueId &id) {
  void *comm = init_comm(id, rank, n);
  FakeStream *stream = new FakeStream();
  Ctx c{rank, n, comm, stream};
  const double t0 = now_ms();
  broadcast_group(c);
  all_to_all(c);
  ring(c);
  ordered(c);
  mixed(c);
  refused_group(c);
  all_to_all(c);
  two_comms(c);
  CHECK(nccl.comm_destroy(comm) == ncclSuccess);
  delete stream;
  fprintf(stderr, "rank %d: groups and messages took %.0f ms\n", rank, now_ms() - t0);
  return 0;
}
