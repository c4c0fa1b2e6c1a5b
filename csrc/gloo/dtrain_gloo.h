// dtrain_gloo: the C ABI over Gloo that ffi/gloo.ts binds. Every function returns a
// dt_collective_status (collective_codes.h); on failure the message is kept on the handle and read
// with dt_gloo_last_error.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "collective_codes.h"

#ifdef __cplusplus
// The shim and the shared-memory transport (csrc/shm) name the codes without a prefix.
using namespace dtrain::collective;
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_gloo_ctx dt_gloo_ctx;
// A collective started on a thread of its own (dt_gloo_allgather_start).
typedef struct dt_gloo_work dt_gloo_work;

// Allocates an unconnected context; its error slot exists from here on.
int dt_gloo_ctx_new(dt_gloo_ctx** out);

// Copies the last error message of `ctx` (NUL-terminated, truncated to `len`) and
// returns its full length. A NULL ctx reads the error of the last failed dt_gloo_ctx_new.
int dt_gloo_last_error(dt_gloo_ctx* ctx, char* buf, size_t len);

// Rendezvous through the dtrain store at store_host:store_port (presenting `token`, keys
// under `prefix`), then connects a full mesh of TCP pairs. Binds to interface `iface` if
// non-empty, else to `host`. Blocks up to timeout_ms; the same timeout bounds each collective.
// `global_ranks` (size entries, or NULL for the identity) maps group ranks to job ranks, so
// that messages name the ranks users know.
int dt_gloo_ctx_connect(dt_gloo_ctx* ctx, const char* store_host, int store_port,
                        const char* token, const char* prefix, int rank, int size,
                        const int32_t* global_ranks, const char* host, const char* iface,
                        int64_t timeout_ms);

// Closes the connections and frees the context. Safe on NULL.
int dt_gloo_ctx_free(dt_gloo_ctx* ctx);

// In place over `count` elements.
int dt_gloo_allreduce(dt_gloo_ctx* ctx, void* buf, uint64_t count, int dtype, int op);

// In place; `root` sends its `count` elements to every rank.
int dt_gloo_broadcast(dt_gloo_ctx* ctx, void* buf, uint64_t count, int dtype, int root);

// Gathers `count` elements from every rank. `outs` holds `nouts` pointers: either one
// flat buffer of size * count elements, or one buffer of `count` elements per rank.
int dt_gloo_allgather(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype,
                      void* const* outs, uint64_t nouts);

// dt_gloo_allgather on a thread of its own, for callers that cannot await (FSDP's synchronous
// forward prefetches the next group's parameters while the current group computes). Returns
// once that thread holds the context, so every collective issued afterwards runs after it (see
// [Note: started collectives] in work.cc). Bad arguments fail here (DT_EINVAL) and nothing is
// started; anything else is reported by dt_gloo_work_wait. `in` and the buffers `outs` points to
// must stay untouched until the wait; the pointer array itself is copied.
int dt_gloo_allgather_start(dt_gloo_ctx* ctx, const void* in, uint64_t count, int dtype,
                            void* const* outs, uint64_t nouts, dt_gloo_work** work);

// Blocks until `work` has finished and returns its status; on failure the message is the
// context's last error, as for a blocking call. Bounded by the context timeout, like the
// collective itself. May be called again (same status).
int dt_gloo_work_wait(dt_gloo_work* work);

// Waits for `work` if nobody did, then frees it. Free every work before its context. Safe on NULL.
int dt_gloo_work_free(dt_gloo_work* work);

// Reduces size * out_count input elements across ranks; rank r receives chunk r.
// `out` must not overlap `in`.
int dt_gloo_reduce_scatter(dt_gloo_ctx* ctx, void* out, const void* in, uint64_t out_count,
                           int dtype, int op);

int dt_gloo_barrier(dt_gloo_ctx* ctx);

// Point-to-point messages ([Note: point-to-point protocol] in p2p_message.h). A post numbers the
// message (kind 0: send `buf` to group rank `peer`; 1: receive into it) in posting order, which
// is the order messages between two ranks match in; `dims` (`ndim` entries, or NULL) is the
// tensor's shape, checked against the other side's with dtype, bytes and tag. The op runs in
// dt_gloo_p2p_run (on any thread, beside collectives and other ops); a failure's message is read
// with dt_gloo_p2p_error. Free every op, run or not; freeing the context aborts running ones.
typedef struct dt_gloo_p2p dt_gloo_p2p;
int dt_gloo_p2p_post(dt_gloo_ctx* ctx, int kind, int peer, void* buf, uint64_t count, int dtype,
                     uint32_t tag, const int64_t* dims, uint32_t ndim, dt_gloo_p2p** out);
// Runs the op until its message has moved, within the context timeout. Again: the same status.
int dt_gloo_p2p_run(dt_gloo_p2p* op);
// Copies the op's error message (NUL-terminated, truncated to `len`), returns its length.
// Blocks until a run of `op` started on another thread has returned; returns its status.
int dt_gloo_p2p_wait(dt_gloo_p2p* op);
int dt_gloo_p2p_error(dt_gloo_p2p* op, char* buf, size_t len);
int dt_gloo_p2p_free(dt_gloo_p2p* op);

#ifdef __cplusplus
}
#endif
