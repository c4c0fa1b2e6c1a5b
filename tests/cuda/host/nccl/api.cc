/* The collectives, the messages and the groups: each call is checked on the caller's thread, then
 * queued on its stream as a unit of work (ops.cc, [Note: units of work]), alone or with the other
 * calls of its group. Nothing is ever computed on the caller's thread: a stream that is not a host
 * build's (stream_abi.h; NULL, the legacy default stream, included) is refused. */
#include <stdint.h>

#include "standin.h"

using namespace nccl_standin;

namespace {

/* ncclGroupStart/End nest per thread, as NCCL's do; the calls in between wait here. */
struct Pending {
  Comm *comm;
  void *stream;
  Call call;
};
struct Group {
  int depth = 0;
  int error = ncclSuccess; /* the first call of the group that failed */
  std::vector<Pending> calls;
};
thread_local Group g_group;

/* Queues `calls` on `stream` as one unit, holding the communicator's Gloo side for it. */
int enqueue(Comm *c, void *stream, std::vector<Call> calls, const std::string &name) {
  std::unique_ptr<Unit> unit(new Unit());
  unit->comm = c;
  unit->calls = std::move(calls);
  int result = usable(c);
  if (result != ncclSuccess) return result;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    unit->core = c->core;
  }
  if (!unit->core) return invalid(c, ncclInvalidUsage, name + ": the communicator is gone");
  if (dt_host_stream_table(stream)->enqueue(stream, run_unit, unit.get()) != 0)
    return invalid(c, ncclUnhandledCudaError, name + ": the stream's device has failed");
  unit.release(); /* run_unit frees it */
  return ncclSuccess;
}

/* Why `call` cannot run on `c` ("" when it can). */
std::string check(Comm *c, const Call &k) {
  const size_t es = dtype_size(k.dtype);
  if (es == 0) return std::string("dtype ") + std::to_string(k.dtype) + " is not supported";
  const bool reduces = k.kind == kAllReduce || k.kind == kReduceScatter;
  if (reduces && (!op_known(k.op) || fold_fn(k.dtype, k.op) == nullptr))
    return "reduction op " + std::to_string(k.op) + " is not supported";
  if (k.kind == kBroadcast && (k.peer < 0 || k.peer >= c->size))
    return "root " + std::to_string(k.peer) + " is not a rank of " + std::to_string(c->size);
  /* NCCL also matches a rank's messages to itself within a group; dtrain never sends any. */
  if ((k.kind == kSend || k.kind == kRecv) && (k.peer < 0 || k.peer >= c->size || k.peer == c->rank))
    return "peer " + std::to_string(k.peer) + " is not another rank of " + std::to_string(c->size);
  if (k.count > SIZE_MAX / es / static_cast<size_t>(c->size)) return "count is too large";
  if (k.count == 0) return "";
  const bool reads = k.kind != kRecv && (k.kind != kBroadcast || k.peer == c->rank);
  if (reads && k.send == nullptr) return "the send buffer is NULL";
  if (k.kind != kSend && k.recv == nullptr) return "the receive buffer is NULL";
  return "";
}

/* Checks `call` and queues it, or keeps it for the group's end. */
int submit(Comm *c, void *stream, const Call &call) {
  const std::string name = call_name(call.kind);
  int result = ncclSuccess;
  if (c == nullptr) {
    result = invalid(nullptr, ncclInvalidArgument, name + ": comm is NULL");
  } else if ((result = usable(c)) != ncclSuccess) {
    /* A failed or aborted communicator: its error, nothing queued. */
  } else if (dt_host_stream_table(stream) == nullptr) {
    result = invalid(c, ncclInvalidArgument,
                     name + ": the stream is not a host build's stream (stream_abi.h)");
  } else {
    std::string why = check(c, call);
    if (!why.empty()) result = invalid(c, ncclInvalidArgument, name + ": " + why);
  }
  if (g_group.depth > 0) {
    if (result != ncclSuccess) {
      if (g_group.error == ncclSuccess) g_group.error = result;
    } else {
      g_group.calls.push_back({c, stream, call});
    }
    return result;
  }
  if (result != ncclSuccess) return result;
  return enqueue(c, stream, {call}, name);
}

}  // namespace

STANDIN_EXPORT int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op,
                                 ncclComm_t comm, void *stream) {
  return submit(static_cast<Comm *>(comm), stream, {kAllReduce, send, recv, count, dtype, op, -1});
}

/* On ranks other than the root, `send` is not read (as in NCCL). */
STANDIN_EXPORT int ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root,
                                 ncclComm_t comm, void *stream) {
  return submit(static_cast<Comm *>(comm), stream, {kBroadcast, send, recv, count, dtype, -1, root});
}

/* `recv` holds nranks * sendcount elements, rank r's at recv + r * sendcount; in place when
 * send == recv + rank * sendcount. */
STANDIN_EXPORT int ncclAllGather(const void *send, void *recv, size_t sendcount, int dtype,
                                 ncclComm_t comm, void *stream) {
  return submit(static_cast<Comm *>(comm), stream,
                {kAllGather, send, recv, sendcount, dtype, -1, -1});
}

/* `send` holds nranks * recvcount elements; rank r gets the reduction of every rank's chunk r. In
 * place when recv == send + rank * recvcount. */
STANDIN_EXPORT int ncclReduceScatter(const void *send, void *recv, size_t recvcount, int dtype,
                                     int op, ncclComm_t comm, void *stream) {
  return submit(static_cast<Comm *>(comm), stream,
                {kReduceScatter, send, recv, recvcount, dtype, op, -1});
}

STANDIN_EXPORT int ncclSend(const void *buf, size_t count, int dtype, int peer, ncclComm_t comm,
                            void *stream) {
  return submit(static_cast<Comm *>(comm), stream, {kSend, buf, nullptr, count, dtype, -1, peer});
}

STANDIN_EXPORT int ncclRecv(void *buf, size_t count, int dtype, int peer, ncclComm_t comm,
                            void *stream) {
  return submit(static_cast<Comm *>(comm), stream, {kRecv, nullptr, buf, count, dtype, -1, peer});
}

STANDIN_EXPORT int ncclGroupStart(void) {
  g_group.depth++;
  return ncclSuccess;
}

/* The outermost end queues the group: one unit per communicator and stream, in the order they
 * first appear. A call of the group that failed makes the whole group fail, and none of it runs
 * (NCCL's ncclGroupEnd returns the group's error likewise). */
STANDIN_EXPORT int ncclGroupEnd(void) {
  if (g_group.depth == 0)
    return invalid(nullptr, ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to end");
  if (--g_group.depth > 0) return ncclSuccess;
  std::vector<Pending> calls;
  calls.swap(g_group.calls);
  const int error = g_group.error;
  g_group.error = ncclSuccess;
  if (error != ncclSuccess) return error;
  int result = ncclSuccess;
  while (!calls.empty()) {
    Comm *c = calls[0].comm;
    void *stream = calls[0].stream;
    std::vector<Call> unit;
    std::vector<Pending> rest;
    for (const Pending &p : calls) {
      if (p.comm == c && p.stream == stream) unit.push_back(p.call); else rest.push_back(p);
    }
    int r = enqueue(c, stream, std::move(unit), "ncclGroupEnd");
    if (r != ncclSuccess && result == ncclSuccess) result = r;
    calls.swap(rest);
  }
  return result;
}
