// dtrain_shm: collectives between the ranks of one host through one shared-memory segment, the
// C ABI that ffi/shm.ts binds. Built into libdtrain_gloo.so beside the Gloo shim, whose status
// codes, fingerprints and reduction kernels it shares. Every function returns a
// dt_collective_status; the message of a failure is kept on the handle and read with
// dt_shm_last_error.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_shm_ctx dt_shm_ctx;

// Allocates an unattached context; its error slot exists from here on.
int dt_shm_ctx_new(dt_shm_ctx** out);

// Copies the last error message of `ctx` (NUL-terminated, truncated to `len`), returns its length.
int dt_shm_last_error(dt_shm_ctx* ctx, char* buf, size_t len);

// Maps the group's segment, which has no name in /dev/shm, so nothing survives the processes
// ([Note: unnamed segments] in segment.cc): group rank 0 creates it (`create` = 1, `name` a
// label "/dtrain-..." for messages), the others open it (`name` the handle dt_shm_ctx_handle
// gave on rank 0). `pids` holds every group rank's process id, watched while waiting so that a
// dead peer is named at once; `global_ranks` maps group ranks to job ranks. Each rank stages up
// to `slot_bytes` per phase (every rank passes the same).
int dt_shm_ctx_open(dt_shm_ctx* ctx, const char* name, int create, int rank, int size,
                    const int32_t* global_ranks, const int32_t* pids, uint64_t slot_bytes,
                    int64_t timeout_ms);

// On rank 0, until every rank mapped the segment: copies the handle the others pass to
// dt_shm_ctx_open (NUL-terminated, truncated to `len`) and returns its length; -1 otherwise.
int dt_shm_ctx_handle(dt_shm_ctx* ctx, char* buf, size_t len);

// Waits (on the caller's thread; bind it nonblocking) until every rank has mapped the segment,
// then closes rank 0's descriptor of it.
// It ends the rendezvous in shared memory rather than in the store: a rank that is done with the
// store then knows every peer is done with it too, so a collective blocking its JavaScript thread
// (which may host the store's server) can no longer starve a peer's last store request.
int dt_shm_ctx_wait_mapped(dt_shm_ctx* ctx);

// Unmaps the segment and frees the context. Safe on NULL.
int dt_shm_ctx_free(dt_shm_ctx* ctx);

// Takes the next place in the context's issue queue. Collectives run in ticket order whatever
// thread they arrive on, so a caller may issue one while others are still running.
uint64_t dt_shm_ticket(dt_shm_ctx* ctx);

// Breaks the group from outside its collectives (a hierarchical step across hosts failed): every
// rank waiting in one, now or later, fails with `status` and `message`. Callable from any thread.
int dt_shm_abort(dt_shm_ctx* ctx, int status, const char* message);

// The clock of the collectives' `timing`: CLOCK_MONOTONIC in microseconds. Not the wall clock,
// which a fresh machine's NTP steps mid-run; the caller maps it onto its own timeline once.
double dt_shm_clock_us(void);

// The collectives, as in dtrain_gloo.h, each with its ticket. `timing` (NULL or 2 doubles)
// receives the start and end on dt_shm_clock_us's clock.
int dt_shm_allreduce(dt_shm_ctx* ctx, uint64_t ticket, void* buf, uint64_t count, int dtype,
                     int op, double* timing);
int dt_shm_broadcast(dt_shm_ctx* ctx, uint64_t ticket, void* buf, uint64_t count, int dtype,
                     int root, double* timing);
int dt_shm_allgather(dt_shm_ctx* ctx, uint64_t ticket, const void* in, uint64_t count,
                     int dtype, void* const* outs, uint64_t nouts, double* timing);
int dt_shm_reduce_scatter(dt_shm_ctx* ctx, uint64_t ticket, void* out, const void* in,
                          uint64_t out_count, int dtype, int op, double* timing);
int dt_shm_barrier(dt_shm_ctx* ctx, uint64_t ticket, double* timing);

// Shared buffers ([Note: shared buffers] in internal.h): a collective call, every rank passing
// the same count and dtype, that maps one new segment with a part of `count` elements per rank.
// dt_shm_buffer_data is this rank's part; dt_shm_allreduce on memory inside it reduces every
// rank's part in place, without staging. The mapping lives until dt_shm_buffer_free, even past
// the context.
typedef struct dt_shm_buffer dt_shm_buffer;
int dt_shm_buffer_alloc(dt_shm_ctx* ctx, uint64_t ticket, uint64_t count, int dtype,
                        dt_shm_buffer** out, double* timing);
void* dt_shm_buffer_data(dt_shm_buffer* buffer);
int dt_shm_buffer_free(dt_shm_buffer* buffer);

// dt_shm_allgather on the calling thread, without a ticket of the caller's: it runs once every
// collective issued earlier has ended ([Note: blocking collectives] in internal.h), and fails
// with DT_ETIMEOUT if the queue stood still for a whole timeout instead of hanging.
int dt_shm_allgather_blocking(dt_shm_ctx* ctx, const void* in, uint64_t count, int dtype,
                              void* const* outs, uint64_t nouts);

// dt_shm_allreduce, blocking the same way, with its timing: DDP reduces its last bucket with it
// once backward has returned, where handing it to another thread would only add a wake-up.
int dt_shm_allreduce_blocking(dt_shm_ctx* ctx, void* buf, uint64_t count, int dtype, int op,
                              double* timing);

// dt_shm_reduce_scatter, blocking the same way, with its timing (tensor parallelism reduces
// inside synchronous forward and backward code with it).
int dt_shm_reduce_scatter_blocking(dt_shm_ctx* ctx, void* out, const void* in,
                                   uint64_t out_count, int dtype, int op, double* timing);

// dt_shm_broadcast, blocking the same way (the hierarchical backend's blocking all-gather hands
// the gathered result from each host's leader to its members with it).
int dt_shm_broadcast_blocking(dt_shm_ctx* ctx, void* buf, uint64_t count, int dtype, int root);

// dt_shm_allgather on a thread of its own: takes its ticket before returning (so collectives
// issued afterwards run after it) and hands back a work to wait for and free. `outs` is copied.
typedef struct dt_shm_work dt_shm_work;
int dt_shm_allgather_start(dt_shm_ctx* ctx, const void* in, uint64_t count, int dtype,
                           void* const* outs, uint64_t nouts, dt_shm_work** out);
// Blocks until the started gather ended; returns its status and copies its error message
// (NUL-terminated, truncated to `len`). Calling it again returns the same at once.
int dt_shm_work_wait(dt_shm_work* work, char* error, size_t len);
// Waits for the gather if nobody did, then frees the work. Safe on NULL.
int dt_shm_work_free(dt_shm_work* work);

// Point-to-point messages, as dt_gloo_p2p_post/run/error/free in dtrain_gloo.h, through the
// segment's channel for the pair (p2p.cc). Ops on one channel run in posting order.
typedef struct dt_shm_p2p dt_shm_p2p;
int dt_shm_p2p_post(dt_shm_ctx* ctx, int kind, int peer, void* buf, uint64_t count, int dtype,
                    uint32_t tag, const int64_t* dims, uint32_t ndim, dt_shm_p2p** out);
int dt_shm_p2p_run(dt_shm_p2p* op);
// Blocks until a run of `op` started on another thread has returned; returns its status.
int dt_shm_p2p_wait(dt_shm_p2p* op);
int dt_shm_p2p_error(dt_shm_p2p* op, char* buf, size_t len);
int dt_shm_p2p_free(dt_shm_p2p* op);

#ifdef __cplusplus
}
#endif
