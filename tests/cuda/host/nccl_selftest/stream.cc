/* The self-test's host-build stream (stream_abi.h) and its small helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "selftest.h"

namespace {

int fake_enqueue(void *stream, dt_host_work fn, void *arg) {
  FakeStream *s = static_cast<FakeStream *>(stream);
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->failed) return -1;
  s->queue.emplace_back(fn, arg);
  s->queued++;
  s->cv.notify_all();
  return 0;
}

void fake_fail(void *stream, const char *message) {
  FakeStream *s = static_cast<FakeStream *>(stream);
  fprintf(stderr, "rank %d: stream failed: %s\n", g_rank, message);
  std::lock_guard<std::mutex> lock(s->mu);
  s->failed = true;
}

const dt_host_stream_ops kOps = {DT_HOST_STREAM_MAGIC, fake_enqueue, fake_fail};

/* Runs the queue in order, one work at a time, as a stream's thread does. */
void serve(FakeStream *s) {
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    s->cv.wait(lock, [s] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty()) return;
    auto work = s->queue.front();
    s->queue.pop_front();
    lock.unlock();
    work.first(work.second);
    lock.lock();
    s->ran++;
    s->cv.notify_all();
  }
}

}  // namespace

FakeStream::FakeStream() {
  head.ops = &kOps;
  thread = std::thread(serve, this);
}

FakeStream::~FakeStream() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  thread.join();
}

uint64_t FakeStream::mark() {
  std::lock_guard<std::mutex> lock(mu);
  return queued;
}

bool FakeStream::reached(uint64_t m) {
  std::lock_guard<std::mutex> lock(mu);
  return ran >= m;
}

bool FakeStream::wait(uint64_t m, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu);
  return cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return ran >= m; });
}

int g_rank = -1;

double now_ms() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

void fail_check(const char *file, int line, const std::string &what) {
  fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", g_rank, file, line, what.c_str());
  fflush(stderr);
  _exit(1);
}

std::string detail() { return ""; }

std::string detail(const char *format, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, format);
  vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  return std::string("(") + buf + ")";
}

void *init_comm(const ncclUniqueId &id, int rank, int n) {
  void *comm = nullptr;
  int r = nccl.comm_init_rank(&comm, n, id, rank);
  CHECK(r == ncclSuccess && comm != nullptr, "ncclCommInitRank: %d %s", r, nccl.last_error(nullptr));
  return comm;
}
