/* Failures, as dtrain's wait (csrc/cuda/nccl_ctx.cuh wait_done) meets them: the work on the stream
 * must not complete, the communicator's async error must say why within a few seconds, later calls
 * must return it without queuing anything, and ncclCommAbort must return at once and let the
 * queued work finish. */
#include <signal.h>
#include <string.h>

#include <vector>

#include "selftest.h"

namespace {

/* Polls as wait_done does; the async error once there is one (ncclSuccess after `limit_ms`). The
 * work must not complete meanwhile. */
int await_error(void *comm, FakeStream *stream, uint64_t mark, int limit_ms) {
  const double start = now_ms();
  int async = ncclSuccess;
  while (now_ms() - start < limit_ms) {
    CHECK(nccl.comm_get_async_error(comm, &async) == ncclSuccess);
    if (async != ncclSuccess) return async;
    CHECK(!stream->reached(mark), "the work completed although a peer is gone");
    sleep_ms(2);
  }
  return async;
}

/* The survivor's side once the error is there: the work stays blocked, later calls return the
 * error, and the abort releases the work. */
void after_failure(void *comm, FakeStream *stream, uint64_t mark, int async) {
  CHECK(!std::string(nccl.last_error(comm)).empty(), "no message for ncclGetLastError");
  sleep_ms(200);
  CHECK(!stream->reached(mark), "the failed work completed before the abort");
  float x = 0;
  const uint64_t before = stream->mark();
  CHECK(nccl.all_reduce(&x, &x, 1, ncclFloat32, ncclSum, comm, stream) == async);
  CHECK(nccl.group_start() == ncclSuccess);
  CHECK(nccl.send(&x, 1, ncclFloat32, 0, comm, stream) == async);
  CHECK(nccl.group_end() == async);
  CHECK(stream->mark() == before, "a call on a failed communicator was queued");
  const double t = now_ms();
  CHECK(nccl.comm_abort(comm) == ncclSuccess);
  CHECK(now_ms() - t < 1000, "ncclCommAbort took %.0f ms", now_ms() - t);
  CHECK(stream->wait(mark, 3000), "the failed work did not finish after ncclCommAbort");
}

}  // namespace

/* The last rank dies (SIGKILL) while the others wait for it in an all-reduce. */
int scenario_kill(int rank, int n, const ncclUniqueId &id) {
  void *comm = init_comm(id, rank, n);
  FakeStream *stream = new FakeStream();
  std::vector<float> buf(size_t(1) << 16, 1.0f);
  CHECK(nccl.all_reduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  CHECK(stream->wait(stream->mark(), 10000) && buf[0] == static_cast<float>(n), "warm-up");
  if (rank == n - 1) {
    sleep_ms(300);
    raise(SIGKILL);
  }
  CHECK(nccl.all_reduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  const uint64_t mark = stream->mark();
  const double t0 = now_ms();
  const int async = await_error(comm, stream, mark, 8000);
  const double took = now_ms() - t0;
  CHECK(async == ncclRemoteError, "async error %d after %.0f ms: %s", async, took, nccl.last_error(comm));
  CHECK(took < 300 + 4000, "the error took %.0f ms", took);
  fprintf(stderr, "rank %d: error %.0f ms after the collective began (peer killed at ~300 ms): %s\n",
          rank, took, nccl.last_error(comm));
  after_failure(comm, stream, mark, async);
  delete stream;
  return 0;
}

/* Rank 1 streams 8 MB messages to rank 0 and dies in the middle of one: rank 0's receive is then
 * half read, which Gloo's failed connection does not wake (the stand-in's watchdog must). The
 * timeout is 30 s, so only that can report the error in time. */
int scenario_kill_midflight(int rank, int n, const ncclUniqueId &id) {
  void *comm = init_comm(id, rank, n);
  FakeStream *stream = new FakeStream();
  const size_t count = size_t(2) << 20;
  const int messages = 200;
  std::vector<float> buf(count, static_cast<float>(rank));
  for (int k = 0; k < messages; k++) {
    int r = rank == 1 ? nccl.send(buf.data(), count, ncclFloat32, 0, comm, stream)
                      : nccl.recv(buf.data(), count, ncclFloat32, 1, comm, stream);
    CHECK(r == ncclSuccess);
  }
  const uint64_t mark = stream->mark();
  if (rank == 1) {
    while (!stream->reached(3)) sleep_ms(1);
    sleep_ms(3);
    raise(SIGKILL);
  }
  const double t0 = now_ms();
  const int async = await_error(comm, stream, mark, 10000);
  const double took = now_ms() - t0;
  CHECK(async == ncclRemoteError, "async error %d after %.0f ms: %s", async, took, nccl.last_error(comm));
  CHECK(took < 5000, "the error took %.0f ms", took);
  fprintf(stderr, "rank %d: error after %.0f ms: %s\n", rank, took, nccl.last_error(comm));
  after_failure(comm, stream, mark, async);
  delete stream;
  return 0;
}

/* Rank 1 joins, then stays silent; rank 0's all-reduce waits for it (the timeout is 60 s) until
 * rank 0 aborts, which must free its stream at once. */
int scenario_silent_abort(int rank, int n, const ncclUniqueId &id) {
  void *comm = init_comm(id, rank, n);
  if (rank == 1) {
    sleep_ms(2000);
    CHECK(nccl.comm_destroy(comm) == ncclSuccess);
    return 0;
  }
  FakeStream *stream = new FakeStream();
  std::vector<float> buf(1000, 1.0f);
  CHECK(nccl.all_reduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  const uint64_t mark = stream->mark();
  CHECK(await_error(comm, stream, mark, 600) == ncclSuccess, "an error without a failure");
  const double t = now_ms();
  CHECK(nccl.comm_abort(comm) == ncclSuccess);
  CHECK(now_ms() - t < 1000, "ncclCommAbort took %.0f ms", now_ms() - t);
  CHECK(stream->wait(mark, 1000), "the work did not finish after ncclCommAbort");
  fprintf(stderr, "rank %d: abort freed the stream in %.1f ms\n", rank, now_ms() - t);
  delete stream;
  return 0;
}

/* With DTRAIN_NCCL_STANDIN_TIMEOUT_MS=1000, a silent peer is a system error after about 1 s. */
int scenario_timeout(int rank, int n, const ncclUniqueId &id) {
  void *comm = init_comm(id, rank, n);
  if (rank == 1) {
    sleep_ms(3000);
    CHECK(nccl.comm_destroy(comm) == ncclSuccess);
    return 0;
  }
  FakeStream *stream = new FakeStream();
  std::vector<float> buf(1000, 1.0f);
  CHECK(nccl.all_reduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream) == ncclSuccess);
  const uint64_t mark = stream->mark();
  const double t0 = now_ms();
  const int async = await_error(comm, stream, mark, 5000);
  const double took = now_ms() - t0;
  CHECK(async == ncclSystemError, "async error %d after %.0f ms", async, took);
  CHECK(took > 800 && took < 2500, "the timeout came after %.0f ms", took);
  CHECK(strstr(nccl.last_error(comm), "Timed out") != nullptr, "message: %s", nccl.last_error(comm));
  fprintf(stderr, "rank %d: timed out after %.0f ms: %s\n", rank, took, nccl.last_error(comm));
  after_failure(comm, stream, mark, async);
  delete stream;
  return 0;
}

/* Rank 1 never joins: rank 0's ncclCommInitRank fails after its 1 s timeout (the FileStore counts
 * whole seconds) instead of waiting forever. */
int scenario_init_timeout(int rank, int n, const ncclUniqueId &id) {
  if (rank == 1) return 0;
  void *comm = nullptr;
  const double t0 = now_ms();
  const int r = nccl.comm_init_rank(&comm, n, id, rank);
  const double took = now_ms() - t0;
  CHECK(r == ncclSystemError || r == ncclRemoteError, "ncclCommInitRank returned %d", r);
  CHECK(comm == nullptr && took < 5000, "took %.0f ms", took);
  CHECK(!std::string(nccl.last_error(nullptr)).empty());
  fprintf(stderr, "rank %d: init failed after %.0f ms: %s\n", rank, took, nccl.last_error(nullptr));
  return 0;
}
