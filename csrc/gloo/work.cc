// Collectives started on a thread of their own, for callers that cannot await but can wait:
// FSDP's synchronous forward starts the next group's all-gather, computes the current group, and
// then waits for it. The collective is the blocking one (same fingerprint, timeouts and errors).
#include <condition_variable>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "internal.h"

// [Note: started collectives]
// dt_gloo_allgather_start returns only once its thread holds the context's call lock. Every
// collective holds that lock for its whole run and draws its op number (the fingerprint's seq,
// which also makes the slots and tags of its messages) under it, so a collective issued after
// the start returns, from any thread, runs after the started one: collectives run in issue order,
// which is the same on every rank because the ranks issue the same calls in the same order (the
// process group and FSDP see to that, and the fingerprints catch it when not). Two collectives
// never run on one context at once, so the started one needs no slots or tags of its own, and a
// call issued behind it just waits for the lock. A failure is the blocking call's (a timeout
// naming the missing ranks, a lost connection naming the peer, the context left broken); it is
// kept on the work until the wait, which puts its message back on the context's error slot.

struct dt_gloo_work {
  dt_gloo_ctx* ctx = nullptr;
  std::vector<void*> outs;  // a copy: the caller's pointer array need not outlive the start
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool holding = false;  // the thread holds ctx->call_mu; guarded by mu
  int status = DT_OK;    // written by the thread, read after joining it
  std::string error;
};

namespace {

void runAllGather(dt_gloo_work* work, const void* in, uint64_t count, int dtype) {
  dt_gloo_ctx* ctx = work->ctx;
  std::lock_guard<std::mutex> call(ctx->call_mu);
  {
    std::lock_guard<std::mutex> lock(work->mu);
    work->holding = true;
  }
  work->cv.notify_one();
  work->status = dtrain::guard(ctx, [&] {
    dtrain::allGather(ctx, in, count, dtype, work->outs.data(), work->outs.size());
  });
  // Under the call lock still: the context may be freed as soon as it is released.
  if (work->status != DT_OK) {
    try {
      work->error = dtrain::lastErrorOf(ctx);
    } catch (...) {
      // Out of memory for the message: the status still tells what happened.
    }
  }
}

}  // namespace

extern "C" {

int dt_gloo_allgather_start(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype,
                            void* const* outs, uint64_t nouts, dt_gloo_work** out) {
  if (ctx == nullptr || out == nullptr) return DT_EINVAL;
  *out = nullptr;
  std::unique_ptr<dt_gloo_work> work;
  int status = dtrain::guard(ctx, [&] {
    dtrain::checkAllGather(ctx, in, count, dtype, outs, nouts);
    work = std::make_unique<dt_gloo_work>();
    work->ctx = ctx;
    work->outs.assign(outs, outs + nouts);
    try {
      work->thread = std::thread(runAllGather, work.get(), in, count, dtype);
    } catch (const std::system_error& e) {
      throw dtrain::Failure(DT_EINTERNAL,
                            std::string("allGather: cannot start a thread: ") + e.what());
    }
    std::unique_lock<std::mutex> lock(work->mu);
    work->cv.wait(lock, [&] { return work->holding; });
  });
  if (status == DT_OK) *out = work.release();
  return status;
}

int dt_gloo_work_wait(dt_gloo_work* work) {
  if (work == nullptr) return DT_EINVAL;
  if (work->thread.joinable()) work->thread.join();
  if (work->status != DT_OK) dtrain::setLastError(work->ctx, work->error.c_str());
  return work->status;
}

int dt_gloo_work_free(dt_gloo_work* work) {
  if (work == nullptr) return DT_OK;
  if (work->thread.joinable()) work->thread.join();
  delete work;
  return DT_OK;
}

}  // extern "C"
