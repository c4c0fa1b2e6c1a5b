/* The thread pool behind dt_set_num_threads: one kernel call split into tasks that the calling
 * thread and the pool's workers run at once, like ATen's parallel_for.
 *
 * [Note: one pool, single-threaded BLAS]
 * dtrain splits its products itself (matmul.c) and runs OpenBLAS with one thread inside each task.
 * The products of a training step are small (64 rows); OpenBLAS's own threading splits each one
 * with a hand-off per call, while here the two products of a linear layer's backward run whole on
 * two threads and forward products split by output columns, and the same pool also splits the
 * optimizer's update. Splitting never cuts the inner (k) dimension, so every element is summed in
 * the same order as on one thread: results do not depend on the thread count.
 *
 * Each thread first runs its own contiguous share of the tasks (the caller the first), then
 * claims what is left of the others' shares: the same thread gets the same rows of consecutive
 * kernels (a layer norm's rows, then the product's block of those rows), so data written by one
 * kernel is read by the next from the same core's cache (a product that read its input from the
 * other core's cache ran 15-20% slower); and one that other processes deschedule holds nobody up.
 * Waiting threads pause briefly, then yield their core, then sleep on a futex: a busy machine
 * gets its cores back and an idle pool costs nothing. The workers are stopped and joined when the
 * library is unloaded (Deno closes it at exit), so none runs in unmapped code. */
#define _GNU_SOURCE
#include <cblas.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dtrain.h"

#define MAX_THREADS 64
/* Waiting rounds before sleeping on the futex, the first PAUSE_ROUNDS of them busy. */
#define SPIN_ROUNDS 2000
#define PAUSE_ROUNDS 100

/* matmul_bf16.c's: frees the calling thread's conversion scratch; a worker calls it as it stops.
 * Library-internal (hidden), so not in dtrain.h, the FFI's header. */
__attribute__((visibility("hidden"))) void dt_release_thread_scratch(void);

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int threads = 1;   /* pool size, the calling thread included */
static int started = 0;   /* workers running */
static pthread_t workers[MAX_THREADS];
static uint32_t born_at[MAX_THREADS]; /* the generation current when each worker was created */
static _Atomic int stopping;
static _Thread_local int inside_task;

static _Atomic uint32_t generation; /* bumped to publish a job; workers wait on it */
static _Atomic uint32_t pending;    /* workers that have not finished the current job */
static _Atomic int sleeping_workers;
static _Atomic int caller_sleeping;
/* Thread t's share of the current job: share[t].next is the next of its tasks to claim, up to
 * share[t].end (a contiguous block; see dt_parallel), one cache line each. */
static struct {
  _Atomic int64_t next;
  int64_t end;
  char pad[64 - 2 * sizeof(int64_t)];
} share[MAX_THREADS];
static struct {
  dt_task_fn fn;
  void *ctx;
  int64_t tasks;
  int width;
} job;

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* One round of waiting: a pause at first, then giving the core away, so that a descheduled
 * thread of ours (or another process) runs instead of being spun against. */
static inline void wait_round(int round) {
  if (round < PAUSE_ROUNDS) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    sched_yield();
  }
}

/* Runs thread `self`'s share of the tasks, then claims the others' leftovers until none is left: a
 * thread that was descheduled by other processes leaves its share to the others instead of holding
 * everyone up. */
static void run_share(int self) {
  inside_task = 1;
  for (int k = 0; k < job.width; k++) {
    int t = (self + k) % job.width;
    for (int64_t i; (i = atomic_fetch_add_explicit(&share[t].next, 1, memory_order_relaxed)) < share[t].end;)
      job.fn(job.ctx, i);
  }
  inside_task = 0;
}

static void *worker_main(void *arg) {
  int id = (int)(intptr_t)arg;
  uint32_t seen = born_at[id];
  for (;;) {
    uint32_t now;
    int spins = 0;
    while ((now = atomic_load_explicit(&generation, memory_order_acquire)) == seen) {
      if (++spins < SPIN_ROUNDS) {
        wait_round(spins);
        continue;
      }
      atomic_fetch_add(&sleeping_workers, 1);
      if (atomic_load(&generation) == seen) futex_wait(&generation, seen);
      atomic_fetch_sub(&sleeping_workers, 1);
      spins = 0;
    }
    if (atomic_load(&stopping)) {
      dt_release_thread_scratch();
      return NULL;
    }
    seen = now;
    if (id < job.width) run_share(id);
    if (atomic_fetch_sub(&pending, 1) == 1 && atomic_load(&caller_sleeping)) futex_wake(&pending);
  }
  return NULL;
}

/* The default pool size is what OpenBLAS would have used (OPENBLAS_NUM_THREADS or the cores). */
static void init_pool(void) {
  int n = openblas_get_num_threads();
  threads = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
  openblas_set_num_threads(1);
}

/* Starts workers up to threads - 1; on failure the pool stays smaller. Called under pool_lock. */
static void start_workers(void) {
  while (started < threads - 1) {
    born_at[started + 1] = atomic_load(&generation);
    if (pthread_create(&workers[started + 1], NULL, worker_main, (void *)(intptr_t)(started + 1)) != 0) {
      threads = started + 1;
      return;
    }
    started++;
  }
}

/* Stops and joins the workers before the library's code is unmapped. */
__attribute__((destructor)) static void stop_workers(void) {
  if (pthread_mutex_trylock(&pool_lock) != 0) return; /* a job is running: nothing safe to do */
  if (started > 0) {
    atomic_store(&stopping, 1);
    atomic_fetch_add(&generation, 1);
    futex_wake(&generation);
    for (int i = 1; i <= started; i++) pthread_join(workers[i], NULL);
    started = 0;
  }
  pthread_mutex_unlock(&pool_lock);
}

void dt_set_num_threads(int32_t n) {
  pthread_once(&init_once, init_pool);
  pthread_mutex_lock(&pool_lock);
  threads = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
  pthread_mutex_unlock(&pool_lock);
}

int32_t dt_get_num_threads(void) {
  pthread_once(&init_once, init_pool);
  return threads;
}

void dt_parallel(int64_t tasks, dt_task_fn fn, void *ctx) {
  pthread_once(&init_once, init_pool);
  if (tasks <= 0) return;
  /* Nested calls, one task, one thread, or a pool being unloaded: run here, in order. */
  if (tasks == 1 || inside_task || threads == 1 || atomic_load(&stopping) ||
      pthread_mutex_trylock(&pool_lock) != 0) {
    for (int64_t i = 0; i < tasks; i++) fn(ctx, i);
    return;
  }
  start_workers();
  int width = tasks < threads ? (int)tasks : threads;
  if (started == 0 || width == 1) {
    pthread_mutex_unlock(&pool_lock);
    for (int64_t i = 0; i < tasks; i++) fn(ctx, i);
    return;
  }
  job.fn = fn;
  job.ctx = ctx;
  job.tasks = tasks;
  job.width = width;
  for (int t = 0; t < width; t++) {
    atomic_store_explicit(&share[t].next, tasks * t / width, memory_order_relaxed);
    share[t].end = tasks * (t + 1) / width;
  }
  atomic_store(&pending, (uint32_t)started);
  atomic_fetch_add_explicit(&generation, 1, memory_order_release);
  if (atomic_load(&sleeping_workers) > 0) futex_wake(&generation);
  run_share(0);
  int spins = 0;
  uint32_t left;
  while ((left = atomic_load_explicit(&pending, memory_order_acquire)) != 0) {
    if (++spins < SPIN_ROUNDS) {
      wait_round(spins);
      continue;
    }
    atomic_store(&caller_sleeping, 1);
    left = atomic_load(&pending);
    if (left != 0) futex_wait(&pending, left);
    atomic_store(&caller_sleeping, 0);
    spins = 0;
  }
  pthread_mutex_unlock(&pool_lock);
}

/* ---------------------------------------------------------------- ranges */

typedef struct {
  dt_range_fn fn;
  void *ctx;
  int64_t n, chunk;
} range_job_t;

static void range_task(void *ctx, int64_t i) {
  const range_job_t *r = ctx;
  int64_t begin = i * r->chunk, end = begin + r->chunk < r->n ? begin + r->chunk : r->n;
  if (begin < end) r->fn(r->ctx, begin, end);
}

void dt_parallel_range(int64_t n, int64_t min_chunk, dt_range_fn fn, void *ctx) {
  if (n <= 0) return;
  int64_t tasks = n / (min_chunk > 0 ? min_chunk : 1);
  int32_t width = dt_get_num_threads();
  if (tasks > width) tasks = width;
  if (tasks <= 1) {
    fn(ctx, 0, n);
    return;
  }
  /* Chunks of whole 64-byte lines, so that no two threads write one cache line. */
  range_job_t r = {fn, ctx, n, ((n + tasks - 1) / tasks + 15) / 16 * 16};
  dt_parallel((n + r.chunk - 1) / r.chunk, range_task, &r);
}
