// All-gathers started on a thread of their own, for FSDP's forward prefetch: the JavaScript
// thread starts the next group's gather, computes the current group, then waits for it. The
// gather takes its ticket before the start returns, so every collective issued afterwards, from
// any thread, runs after it ([Note: blocking collectives] in internal.h says why waiting for it
// on the JavaScript thread cannot hang).
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "internal.h"

struct dt_shm_work {
  dt_shm_ctx* ctx = nullptr;
  std::vector<void*> outs;  // a copy: the caller's pointer array need not outlive the start
  std::thread thread;
  bool joined = false;
  int status = DT_OK;  // written by the thread, read after joining it
  std::string error;   // its own copy: a later failure on the context may overwrite the slot
};

extern "C" {

int dt_shm_allgather_start(dt_shm_ctx* ctx, const void* in, uint64_t count, int dtype,
                           void* const* outs, uint64_t nouts, dt_shm_work** out) {
  if (ctx == nullptr || out == nullptr) return DT_EINVAL;
  auto* work = new (std::nothrow) dt_shm_work();
  if (work == nullptr) return DT_EINTERNAL;
  try {
    work->ctx = ctx;
    if (outs != nullptr) work->outs.assign(outs, outs + nouts);
    const uint64_t ticket = dt_shm_ticket(ctx);
    try {
      work->thread = std::thread([work, ticket, in, count, dtype] {
        work->status = dtrain::shm::serve(
            work->ctx, ticket, nullptr,
            [&] {
              dtrain::shm::allGather(work->ctx, in, count, dtype,
                                     work->outs.empty() ? nullptr : work->outs.data(),
                                     work->outs.size());
            },
            &work->error);
      });
    } catch (const std::system_error&) {
      // The ticket is ours and must be served, or every later collective waits for it: serve
      // it here, on the calling thread (it runs once every earlier ticket has).
      work->status = dtrain::shm::serve(
          ctx, ticket, nullptr,
          [&] { throw dtrain::Failure(DT_EINTERNAL, "allGather: could not start a thread"); },
          &work->error);
      work->joined = true;
    }
  } catch (const std::bad_alloc&) {
    delete work;
    return DT_EINTERNAL;
  }
  *out = work;
  return DT_OK;
}

int dt_shm_work_wait(dt_shm_work* work, char* error, size_t len) {
  if (work == nullptr) return DT_EINVAL;
  if (!work->joined) {
    work->thread.join();
    work->joined = true;
  }
  dtrain::copyMessage(work->error, error, len);
  return work->status;
}

int dt_shm_work_free(dt_shm_work* work) {
  if (work == nullptr) return DT_OK;
  if (!work->joined) work->thread.join();
  delete work;
  return DT_OK;
}

}  // extern "C"
