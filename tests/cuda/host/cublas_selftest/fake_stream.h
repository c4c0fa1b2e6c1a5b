/* A minimal host-build stream for the cuBLAS stand-in's self-test: what csrc/cuda/host/ gives
 * the real ones (stream_abi.h: a struct that begins with a pointer to the ops table), an in-order
 * queue served by one thread of its own. It can be held (its thread takes nothing until released),
 * so the test can see that a product was queued rather than run on the caller's thread, and
 * failed, as a faulting kernel fails a device. */
#pragma once

#include <stdio.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "../../../../csrc/cuda/host/stream_abi.h"

struct fake_stream {
  const dt_host_stream_ops *ops; /* first, as stream_abi.h requires */
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<dt_host_work, void *>> queue;
  size_t queued = 0, done = 0;
  bool held = false, failed = false, stopping = false;
  std::thread worker;

  fake_stream();
  ~fake_stream();
  void hold() {
    std::lock_guard<std::mutex> lock(mu);
    held = true;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    held = false;
    cv.notify_all();
  }
  /* Waits for everything queued so far to have run (the stream must not be held). */
  void sync() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done == queued; });
  }
  size_t queued_count() {
    std::lock_guard<std::mutex> lock(mu);
    return queued;
  }
  void serve() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stopping || (!held && !queue.empty()); });
      if (queue.empty()) return; /* stopping, all served */
      std::pair<dt_host_work, void *> item = queue.front();
      queue.pop_front();
      lock.unlock();
      item.first(item.second);
      lock.lock();
      done++;
      cv.notify_all();
    }
  }
};

static int fake_enqueue(void *stream, dt_host_work fn, void *arg) {
  fake_stream *s = (fake_stream *)stream;
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->failed) return -1;
  s->queue.emplace_back(fn, arg);
  s->queued++;
  s->cv.notify_all();
  return 0;
}

static void fake_fail(void *stream, const char *message) {
  fake_stream *s = (fake_stream *)stream;
  std::lock_guard<std::mutex> lock(s->mu);
  s->failed = true;
  fprintf(stderr, "fake stream failed: %s\n", message);
}

static const dt_host_stream_ops fake_ops = {DT_HOST_STREAM_MAGIC, fake_enqueue, fake_fail};

inline fake_stream::fake_stream() : ops(&fake_ops), worker([this] { serve(); }) {}

inline fake_stream::~fake_stream() {
  {
    std::lock_guard<std::mutex> lock(mu);
    held = false;
    stopping = true;
    cv.notify_all();
  }
  worker.join();
}
