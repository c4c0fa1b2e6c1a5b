/* Runs a kernel's grid on the stream's thread ([Note: the host build] in cuda_runtime.h): block
 * after block, in a permuted order, each block's threads as fibers.
 *
 * [Note: block threads as fibers]
 * A thread runs until it returns, reaches __syncthreads, or reaches a warp operation (a shuffle, a
 * vote, __syncwarp); then the next runnable thread runs. When every thread of a warp that has not
 * returned waits at a warp operation, they become runnable again; when every thread of the block
 * that has not returned waits at __syncthreads, all do. The order in which runnable threads run is
 * a fresh permutation after every release (seeded: runtime_internal.h's order_seed), so a thread
 * reading shared memory that another writes without a barrier between them sees the write or not
 * from one launch to the next, and a test of the result fails. Threads of a block waiting at
 * different kinds of barrier can never all be released: that is a kernel fault, named, as a hang
 * on a GPU would be. A shuffle deposits its value in one of two slots (alternating), so a lane
 * that runs ahead to the next shuffle cannot overwrite a value a slower lane has yet to read. */
/* [Note: one grid at a time]
 * Grids of different streams do not overlap: a kernel never waits for anything, so holding one
 * process-wide lock while a grid runs costs concurrency only, and it lets a block's `__shared__`
 * variables be plain statics and the coordinates plain globals (thread-local ones are a call per
 * read in a shared library, and too large for the static TLS block a dlopen'd library may use).
 * Copies, collectives and host work still run beside a kernel, on their own stream threads, so a
 * missing wait between them and a kernel still shows. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "fiber.h"
#include "runtime_internal.h"

namespace dt_host {

const block_coordinates *current_block;
const dim3 *current_thread;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kStackBytes = 256 << 10; /* AddressSanitizer's redzones make frames larger */
#else
constexpr size_t kStackBytes = 64 << 10;
#endif
constexpr int kMaxThreads = 1024;

enum thread_state { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_OPERATION, RETURNED };

struct block_thread {
  fiber_context context;
  dim3 idx;
  int linear = 0;
  thread_state state = RUNNABLE;
  unsigned exchanges = 0; /* warp exchanges this thread has entered */
};

/* Everything one OS thread needs to run blocks: made on its first kernel, kept for the process. */
struct block_runner {
  fiber_context scheduler;
  block_thread threads[kMaxThreads];
  char *stacks[kMaxThreads] = {};
  block_thread *running = nullptr;
  const std::function<void()> *body = nullptr;
  int count = 0;
  int live = 0;   /* threads of the block that have not returned */
  int cursor = 0; /* the next position of `order` the current pass looks at */
  int resumed = 0; /* threads resumed in the current pass */
  uint64_t slots[2][kMaxThreads];
  std::vector<int> order;
  uint64_t random = 0;
};

block_runner *runner;

/* One grid runs at a time in the process ([Note: one grid at a time]). */
std::mutex &grids_mutex() {
  static std::mutex *m = new std::mutex();
  return *m;
}

/* A stack with an inaccessible page below it, so an overflow faults instead of corrupting. */
char *new_stack(void) {
  size_t page = 4096;
  char *base = (char *)mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    perror("dtrain host CUDA: a block thread's stack");
    abort();
  }
  mprotect(base, page, PROT_NONE);
  return base + page;
}

/* Leaves `from` for the next runnable thread of the pass, or for the scheduler when the pass is
 * over: a thread hands over to the next directly, so a wait costs one switch, not two. */
void resume_next(block_runner &r, fiber_context *from) {
  while (r.cursor < r.count) {
    block_thread &next = r.threads[r.order[r.cursor++]];
    if (next.state != RUNNABLE) continue;
    r.resumed++;
    r.running = &next;
    current_thread = &next.idx;
    fiber_switch(from, &next.context);
    return;
  }
  if (from != &r.scheduler) fiber_switch(from, &r.scheduler);
}

void thread_entry(void) {
  block_runner *r = runner;
  fiber_started();
  (*r->body)();
  r->running->state = RETURNED;
  r->live--;
  resume_next(*r, &r->running->context);
  abort(); /* a returned thread is never resumed */
}

void wait_as(thread_state state) {
  block_runner &r = *runner;
  block_thread *self = r.running;
  self->state = state;
  resume_next(r, &self->context);
}

/* Fisher-Yates with Lemire's multiply-shift in place of a division: a shuffle per barrier is a
 * large part of a block's cost otherwise. */
void shuffle_order(block_runner &r) {
  uint64_t bits = 0;
  for (int i = r.count - 1; i > 0; i--) {
    if ((i & 1) == 1 || bits == 0) bits = next_random(r.random);
    uint32_t draw = (uint32_t)bits;
    bits >>= 32;
    int j = (int)(((uint64_t)draw * (uint64_t)(i + 1)) >> 32);
    std::swap(r.order[i], r.order[j]);
  }
}

enum released { NOTHING, WARPS, BLOCK };

/* Releases whatever waits can be released. */
released release(block_runner &r) {
  bool released = false;
  for (int warp = 0; warp * 32 < r.count; warp++) {
    int end = std::min(r.count, warp * 32 + 32), live = 0, waiting = 0;
    for (int t = warp * 32; t < end; t++) {
      live += r.threads[t].state != RETURNED;
      waiting += r.threads[t].state == AT_WARP_OPERATION;
    }
    if (waiting == 0 || waiting != live) continue;
    for (int t = warp * 32; t < end; t++)
      if (r.threads[t].state == AT_WARP_OPERATION) r.threads[t].state = RUNNABLE;
    released = true;
  }
  if (released) return WARPS;
  int at_barrier = 0;
  for (int t = 0; t < r.count; t++) at_barrier += r.threads[t].state == AT_BLOCK_BARRIER;
  if (at_barrier == 0 || at_barrier != r.live) return NOTHING;
  for (int t = 0; t < r.count; t++)
    if (r.threads[t].state == AT_BLOCK_BARRIER) r.threads[t].state = RUNNABLE;
  return BLOCK;
}

/* Runs one block to its end; false (with `why`) when its threads can never all finish. */
bool run_block(block_runner &r, const block_coordinates &where, std::string &why) {
  const dim3 &dim = where.block_dim;
  r.count = (int)(dim.x * dim.y * dim.z);
  current_block = &where;
  for (int t = 0; t < r.count; t++) {
    block_thread &thread = r.threads[t];
    if (r.stacks[t] == nullptr) r.stacks[t] = new_stack();
    thread.idx = dim3(t % dim.x, t / dim.x % dim.y, t / (dim.x * dim.y));
    thread.linear = t;
    thread.state = RUNNABLE;
    thread.exchanges = 0;
    /* Stack tops a whole number of pages apart would all fall in the same cache sets; staggering
     * them by cache lines halved the cost of a switch. */
    fiber_prepare(&thread.context, r.stacks[t], kStackBytes - (size_t)(t % 61) * 192, thread_entry);
  }
  r.order.resize(r.count);
  std::iota(r.order.begin(), r.order.end(), 0);
  shuffle_order(r);
  r.live = r.count;
  for (;;) {
    r.cursor = 0;
    r.resumed = 0;
    resume_next(r, &r.scheduler);
    int live = r.live;
    if (live == 0) return true;
    released what = release(r);
    if (what == BLOCK) {
      shuffle_order(r);
    } else if (what == NOTHING && r.resumed == 0) {
      int block = 0, warp = 0;
      for (int t = 0; t < r.count; t++) {
        block += r.threads[t].state == AT_BLOCK_BARRIER;
        warp += r.threads[t].state == AT_WARP_OPERATION;
      }
      why = std::to_string(block) + " thread(s) wait at __syncthreads and " +
            std::to_string(warp) + " at a warp operation while " +
            std::to_string(r.count - live) + " returned: they can never all meet";
      return false;
    }
  }
}

uint64_t gcd(uint64_t a, uint64_t b) { return b == 0 ? a : gcd(b, a % b); }

void run_grid(const char *kernel, dim3 grid, dim3 block, uint64_t launch,
              const std::function<void()> &body) {
  if (running_device_faulted()) return;
  std::lock_guard<std::mutex> one_at_a_time(grids_mutex());
  if (runner == nullptr) runner = new block_runner();
  block_runner &r = *runner;
  fiber_enter_scheduler(&r.scheduler);
  r.body = &body;
  uint64_t blocks = (uint64_t)grid.x * grid.y * grid.z;
  /* Blocks run in the order i -> (a * i + b) mod blocks, a coprime to blocks: a GPU promises no
   * order between blocks, so neither does this. */
  uint64_t random = order_seed() ^ (launch * 0x9E3779B97F4A7C15ull);
  uint64_t a = 1 + next_random(random) % blocks, b = next_random(random) % blocks;
  while (gcd(a, blocks) != 1) a = a % blocks + 1;
  block_coordinates where{dim3(), block, grid};
  for (uint64_t i = 0; i < blocks; i++) {
    uint64_t linear = (uint64_t)(((unsigned __int128)a * i + b) % blocks);
    where.block_idx = dim3((unsigned)(linear % grid.x), (unsigned)(linear / grid.x % grid.y),
                           (unsigned)(linear / ((uint64_t)grid.x * grid.y)));
    r.random = random ^ (linear * 0xBF58476D1CE4E5B9ull);
    std::string why;
    if (!run_block(r, where, why)) {
      fault_running_stream(std::string("kernel ") + kernel + ", block (" +
                           std::to_string(where.block_idx.x) + ", " +
                           std::to_string(where.block_idx.y) + ", " +
                           std::to_string(where.block_idx.z) + "): " + why);
      break;
    }
  }
  current_block = nullptr;
  current_thread = nullptr;
}

std::atomic<uint64_t> launches{0};

} // namespace

void sync_block(void) { wait_as(AT_BLOCK_BARRIER); }

void sync_warp(void) { wait_as(AT_WARP_OPERATION); }

int lane_id(void) { return runner->running->linear & 31; }

uint64_t warp_exchange(uint64_t mine, int src) {
  block_runner &r = *runner;
  block_thread *self = r.running;
  unsigned round = ++self->exchanges;
  uint64_t *slots = r.slots[round & 1];
  slots[self->linear] = mine;
  wait_as(AT_WARP_OPERATION);
  int from = (self->linear & ~31) + src;
  /* A lane that never reached this exchange (it returned first) left nothing to read. */
  bool deposited = src >= 0 && src < 32 && from < r.count && r.threads[from].exchanges >= round;
  return deposited ? slots[from] : mine;
}

unsigned warp_ballot(int predicate) {
  block_runner &r = *runner;
  block_thread *self = r.running;
  unsigned round = ++self->exchanges;
  uint64_t *slots = r.slots[round & 1];
  slots[self->linear] = predicate != 0;
  wait_as(AT_WARP_OPERATION);
  unsigned ballot = 0;
  int base = self->linear & ~31;
  for (int lane = 0; lane < 32 && base + lane < r.count; lane++) {
    if (r.threads[base + lane].exchanges >= round && slots[base + lane]) ballot |= 1u << lane;
  }
  return ballot;
}

void launch_grid(const char *kernel, dim3 grid, dim3 block, size_t shared_bytes,
                 cudaStream_t stream, std::function<void()> thread_body) {
  uint64_t threads = (uint64_t)block.x * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64 || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  /* No kernel of dtrain's sizes its shared memory at launch; the host build has no way to. */
  if (shared_bytes != 0) {
    set_last_error(cudaErrorInvalidValue);
    return;
  }
  uint64_t launch = launches.fetch_add(1);
  cudaError_t queued = enqueue(stream, [kernel, grid, block, launch, body = std::move(thread_body)] {
    run_grid(kernel, grid, block, launch, body);
  });
  if (queued != cudaSuccess) set_last_error(queued);
}

} // namespace dt_host
