// dtrain_shm: collectives between the ranks of one host through one shared-memory segment, the
// C ABI that ffi/shm.ts binds. Built into libdtrain_gloo.so beside the Gloo shim, whose status
// codes, fingerprints and reduction kernels it shares. Every function returns a dt_status; the
// message of a failure is kept on the handle and read with dt_shm_last_error.
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

// Maps segment `name` ("/dtrain-..."): group rank 0 creates it (`create` = 1), the others open
// it once rank 0 said it exists. `pids` holds every group rank's process id, watched while
// waiting so that a dead peer is named at once; `global_ranks` maps group ranks to job ranks.
// Each rank stages up to `slot_bytes` per phase (every rank passes the same). The last rank
// to map the segment unlinks its name, so nothing survives the processes.
int dt_shm_ctx_open(dt_shm_ctx* ctx, const char* name, int create, int rank, int size,
                    const int32_t* global_ranks, const int32_t* pids, uint64_t slot_bytes,
                    int64_t timeout_ms);

// Unlinks the segment's name if it is still linked (a rank never mapped it), unmaps it and
// frees the context. Safe on NULL.
int dt_shm_ctx_free(dt_shm_ctx* ctx);

// Takes the next place in the context's issue queue. Collectives run in ticket order whatever
// thread they arrive on, so a caller may issue one while others are still running.
uint64_t dt_shm_ticket(dt_shm_ctx* ctx);

// Breaks the group from outside its collectives (a hierarchical step across hosts failed): every
// rank waiting in one, now or later, fails with `status` and `message`. Callable from any thread.
int dt_shm_abort(dt_shm_ctx* ctx, int status, const char* message);

// The collectives, as in dtrain_gloo.h, each with its ticket. `timing` (NULL or 2 doubles)
// receives the wall-clock start and end in microseconds since the Unix epoch.
int dt_shm_allreduce(dt_shm_ctx* ctx, uint64_t ticket, void* buf, uint64_t count, int dtype,
                     int op, double* timing);
int dt_shm_broadcast(dt_shm_ctx* ctx, uint64_t ticket, void* buf, uint64_t count, int dtype,
                     int root, double* timing);
int dt_shm_allgather(dt_shm_ctx* ctx, uint64_t ticket, const void* in, uint64_t count,
                     int dtype, void* const* outs, uint64_t nouts, double* timing);
int dt_shm_reduce_scatter(dt_shm_ctx* ctx, uint64_t ticket, void* out, const void* in,
                          uint64_t out_count, int dtype, int op, double* timing);
int dt_shm_barrier(dt_shm_ctx* ctx, uint64_t ticket, double* timing);

#ifdef __cplusplus
}
#endif
