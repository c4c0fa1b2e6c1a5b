/* The self-test of the NCCL stand-in (tests/cuda/host/nccl/): real processes, forked by main.cc,
 * each loading the library with dlopen and the names csrc/cuda/libs.cu resolves, and queuing its
 * work on a minimal host-build stream of its own (stream.cc), as the host build's runtime would.
 *
 * Build and run from the repository root, after building build/cuda_host/libnccl_standin.so: compile
 * the .cc files of this folder with
 *   c++ -O2 -std=c++17 -Wall -Wextra -o build/cuda_host/nccl_selftest <them> -ldl -lpthread
 * then run build/cuda_host/nccl_selftest [path/to/libnccl_standin.so] (default: DTRAIN_NCCL_LIB,
 * then build/cuda_host/libnccl_standin.so).
 * It prints a line per scenario and exits 0 when every one passed. Every process it starts dies
 * with it: a hard alarm() in the parent and in each child, and PR_SET_PDEATHSIG. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "../../../../csrc/cuda/host/stream_abi.h"

enum {
  ncclSuccess = 0,
  ncclSystemError = 2,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6
};
enum { ncclUint8 = 1, ncclInt32 = 2, ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 };
enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };
typedef struct {
  char internal[128];
} ncclUniqueId;

/* The sixteen functions, as libs.h's dt_nccl_api declares them. */
struct Nccl {
  int (*get_unique_id)(ncclUniqueId *id);
  int (*comm_init_rank)(void **comm, int nranks, ncclUniqueId id, int rank);
  int (*comm_destroy)(void *comm);
  int (*comm_abort)(void *comm);
  int (*comm_get_async_error)(void *comm, int *result);
  int (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op, void *comm,
                    void *stream);
  int (*broadcast)(const void *send, void *recv, size_t count, int dtype, int root, void *comm,
                   void *stream);
  int (*all_gather)(const void *send, void *recv, size_t count, int dtype, void *comm,
                    void *stream);
  int (*reduce_scatter)(const void *send, void *recv, size_t count, int dtype, int op,
                        void *comm, void *stream);
  int (*send)(const void *buf, size_t count, int dtype, int peer, void *comm, void *stream);
  int (*recv)(void *buf, size_t count, int dtype, int peer, void *comm, void *stream);
  int (*group_start)(void);
  int (*group_end)(void);
  const char *(*error_string)(int result);
  const char *(*last_error)(void *comm);
  int (*get_version)(int *version);
};
extern Nccl nccl;
/* A second id for the same ranks, made with the scenario's own (a second communicator). */
extern ncclUniqueId g_second_id;

/* A host-build stream: an in-order queue served by its own thread. mark() is an event recorded
 * now, reached() its cudaEventQuery. */
struct FakeStream {
  dt_host_stream_head head; /* first: what dt_host_stream_table reads */
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<dt_host_work, void *>> queue;
  uint64_t queued = 0, ran = 0;
  bool stop = false, failed = false;
  std::thread thread;

  FakeStream();
  ~FakeStream(); /* waits for the queued work */
  uint64_t mark();
  bool reached(uint64_t mark);
  bool wait(uint64_t mark, int timeout_ms);
};

double now_ms();
void sleep_ms(int ms);
/* Reports a failed check of this rank and ends the process (no destructor waits for a stuck
 * stream). */
[[noreturn]] void fail_check(const char *file, int line, const std::string &what);
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) fail_check(__FILE__, __LINE__, std::string(#cond) + " " + detail(__VA_ARGS__));   \
  } while (0)
std::string detail();
std::string detail(const char *format, ...) __attribute__((format(printf, 1, 2)));
extern int g_rank;

/* An initialized communicator of this rank (the check fails otherwise). */
void *init_comm(const ncclUniqueId &id, int rank, int n);

/* The scenarios: each runs in every rank's process and returns its exit status. */
int scenario_collectives(int rank, int n, const ncclUniqueId &id);
int scenario_groups(int rank, int n, const ncclUniqueId &id);
int scenario_kill(int rank, int n, const ncclUniqueId &id);
int scenario_kill_midflight(int rank, int n, const ncclUniqueId &id);
int scenario_silent_abort(int rank, int n, const ncclUniqueId &id);
int scenario_timeout(int rank, int n, const ncclUniqueId &id);
int scenario_init_timeout(int rank, int n, const ncclUniqueId &id);
