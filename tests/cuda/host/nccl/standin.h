/* A CPU stand-in for NCCL, for the tests of the host build (csrc/cuda/host/: the CUDA runtime over
 * host memory, each cudaStream_t an in-order queue served by its own thread). A test that sets
 * DTRAIN_NCCL_LIB to build/cuda_host/libnccl_standin.so makes csrc/cuda/libs.cu dlopen this
 * library instead of libnccl; it is never shipped.
 *
 * Its functions are exactly the sixteen libs.cu dlsyms, with NCCL's names and the ABI of
 * csrc/cuda/libs.h (the other dynamic symbols are weak instances of C++ library templates), and it
 * moves the bytes between real processes with Gloo (Debian's libgloo, its tcp transport on
 * 127.0.0.1). What it keeps of NCCL's behaviour, because dtrain relies on it:
 *  - ncclGetUniqueId makes 128 bytes that rank 0 hands to the others (dtrain's store carries them):
 *    here a magic tag and the path of a fresh private folder, the Gloo FileStore of the rendezvous
 *    (Debian's Gloo has no TCP store). ncclCommInitRank blocks until every rank has joined.
 *  - Every collective and message is queued on the caller's stream (stream_abi.h) and runs there,
 *    in stream order, never on the caller's thread; ncclGroupStart/End turn the calls between them
 *    into one unit of work, so that a batch of sends and receives cannot deadlock.
 *  - A failure (a peer's connection closed, a timeout) becomes the communicator's async error
 *    (ncclCommGetAsyncError), and the failed work does NOT complete: a real NCCL kernel spins until
 *    the communicator is aborted, and dtrain's wait (csrc/cuda/nccl_ctx.cuh wait_done) reads a
 *    completed event as success. The work returns once ncclCommAbort is called.
 *  - bf16 and f16 are reduced in their own type one step at a time, rounding each step, in rank
 *    order, so every rank gets the same bits ([Note: half reductions] in csrc/gloo/reduce.cc).
 *
 * Layout: comm.cc (ids, communicators, errors, the watchdog), reduce.cc (the element kernels),
 * ops.cc (the algorithms and the unit of work a stream runs), api.cc (the collectives, messages
 * and groups). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "../../../../csrc/cuda/host/stream_abi.h"

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

/* ncclResult_t, ncclDataType_t and ncclRedOp_t (nccl.h; libs.h names the ones dtrain uses). */
enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
};
enum { ncclUint8 = 1, ncclInt32 = 2, ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 };
enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

/* The ABI's types without NCCL's or CUDA's headers: both handles are pointers, the enums ints. */
typedef void *ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;

/* Our internals stay out of the dynamic symbol table (with every template instantiated on them). */
namespace nccl_standin __attribute__((visibility("hidden"))) {

struct Core;
struct Transfer;

/* What an ncclComm_t points at. Never freed: a call on a communicator after ncclCommDestroy or
 * ncclCommAbort returns an error instead of reading freed memory, and queued work may still hold
 * it. What costs (the Gloo context, its sockets and threads) lives in Core and is freed. */
struct Comm {
  int rank = 0, size = 0;
  std::chrono::milliseconds timeout{0};
  std::mutex mu; /* guards every field below */
  std::condition_variable aborted_cv; /* signalled when `aborted` is set */
  bool aborted = false, destroyed = false;
  int async_error = ncclSuccess; /* the first failure of queued work */
  std::string last_error; /* for ncclGetLastError; "" when none */
  std::vector<Transfer *> live; /* the running unit's transfers, for the abort and the watchdog */
  std::shared_ptr<Core> core; /* NULL once destroyed or aborted; queued work holds its own */
};

/* The Gloo side of a communicator: freed when the communicator is gone and no queued work of it is
 * left, which closes its connections (the peers then see this rank leave). */
struct Core {
  Comm *comm = nullptr;
  std::shared_ptr<gloo::Context> gloo;
  std::mutex op_mu; /* one unit of work at a time, in the order they take it */
  uint64_t coll_seq = 0; /* collectives started, the same on every rank */
  std::vector<uint64_t> send_seq, recv_seq; /* messages to and from each peer */
  /* The watchdog (comm.cc): finds the transfers a dead peer's connection will never finish. */
  std::unique_ptr<gloo::transport::UnboundBuffer> probe;
  char probe_byte = 0;
  std::mutex wd_mu;
  std::condition_variable wd_cv;
  bool wd_stop = false;
  std::thread watchdog;
  ~Core();
};

/* One posted send or receive of a unit of work, registered in its communicator's `live` list for
 * as long as it exists (ops.cc). */
struct Transfer {
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  int peer = 0;
  bool recv = false;
  bool done = false; /* its wait returned */
  bool poked = false; /* the watchdog interrupted its wait: the peer's connection failed */
  std::string peer_error; /* why, as Gloo said it */
};

/* The calls a unit of work carries: one, or the calls of a group. */
enum Kind { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kSend, kRecv };
struct Call {
  Kind kind;
  const void *send;
  void *recv; /* the buffer of a send */
  size_t count; /* elements: per rank for all-gather, received per rank for reduce-scatter */
  int dtype, op, peer; /* peer: the root of a broadcast, the other rank of a message */
};
struct Unit {
  Comm *comm;
  std::shared_ptr<Core> core;
  std::vector<Call> calls;
};

/* Work that gives up because its communicator was aborted (ops.cc throws, run_unit catches). */
struct Aborted {};

/* A failure with its NCCL result. */
struct Failure : std::runtime_error {
  int result;
  Failure(int r, const std::string &what) : std::runtime_error(what), result(r) {}
};

/* comm.cc */
const char *call_name(Kind kind);
int classify(const std::string &gloo_message); /* ncclRemoteError or ncclSystemError */
std::string strip_location(const std::string &gloo_message);
void set_global_error(const std::string &message);
int invalid(Comm *comm, int result, const std::string &message); /* records it, returns result */
int usable(Comm *comm); /* ncclSuccess, or the error a call on it returns */
void record_failure(Comm *comm, int result, const std::string &message);
void block_until_aborted(Comm *comm);
void start_watchdog(Core *core);

/* reduce.cc */
size_t dtype_size(int dtype); /* 0 for a dtype this stand-in does not know */
const char *dtype_name(int dtype);
bool op_known(int op);
/* acc[i] = acc[i] (op) x[i] for n elements, in the dtype's own type (avg sums). */
typedef void (*FoldFn)(void *acc, const void *x, size_t n);
FoldFn fold_fn(int dtype, int op);
/* The end of an average: acc[i] / divisor, rounded to the dtype. */
void divide(void *acc, size_t n, int dtype, int divisor);

/* ops.cc: the work function a stream runs; takes ownership of the Unit. */
void run_unit(void *unit);

} /* namespace nccl_standin */
