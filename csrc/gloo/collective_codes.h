/* The codes every collective backend shares (Gloo here, shared memory in csrc/shm, NCCL in
 * csrc/cuda/nccl.cu), declared once so the three report alike and src/distributed maps them one way;
 * ffi/collective_codes.ts carries the same numbers (tests/ffi/enums_test.ts holds each pair).
 * Also the fingerprint every rank sends before a collective ([Note: fingerprint] in
 * fingerprint.cc) and the names errors use. Plain C, so nvcc, C++ and a C reader see one layout. */
#pragma once

#include <stdint.h>

/* The types are dt_collective_*, so that none shares a name with libdtrain's (dt_status, dt_dtype
 * in csrc/core/dtrain.h, whose members differ). In C++ the codes also live in a namespace: the
 * NCCL shim includes dtrain.h too, whose DT_OK and DT_EINVAL (the same values) would otherwise
 * collide with these. */
#ifdef __cplusplus
namespace dtrain::collective {
#endif

typedef enum {
  DT_OK = 0,
  DT_EINVAL = 1,     /* bad argument, caught before anything was sent */
  DT_ETIMEOUT = 2,   /* a peer did not answer within the context timeout */
  DT_EPEER = 3,      /* a connection to a peer failed (peer died or reset) */
  DT_EMISMATCH = 4,  /* ranks called different collectives (fingerprint check) */
  DT_ESTORE = 5,     /* the rendezvous store refused or failed (Gloo only) */
  DT_EBROKEN = 6,    /* the context failed earlier and can no longer be used */
  DT_EINTERNAL = 7,  /* anything else (an exception from Gloo or the C++ runtime, a CUDA error) */
} dt_collective_status;

/* The element types, numbered as libdtrain's (csrc/core/dtrain.h, where 2 is bool, which no
 * collective takes). bf16 and f16 reduce through f32 one pair at a time, rounding every step to
 * the 2-byte type, as NCCL and PyTorch's Gloo do ([Note: half reductions] in reduce.cc). */
typedef enum { DT_F32 = 0, DT_I32 = 1, DT_BF16 = 3, DT_F16 = 4 } dt_collective_dtype;

/* The reductions of all-reduce and reduce-scatter. */
typedef enum {
  DT_SUM = 0,
  DT_AVG = 1,
  DT_MIN = 2,
  DT_MAX = 3,
  DT_PROD = 4,
} dt_collective_reduce_op;

/* Which side of a point-to-point message a rank posts (dt_gloo_p2p_post, dt_shm_p2p_post,
 * dt_nccl_p2p's `kinds`). */
typedef enum { DT_P2P_SEND = 0, DT_P2P_RECV = 1 } dt_p2p_kind;

/* The collective a fingerprint announces. DT_EMPTY_SHARED is the shared-memory transport's
 * collective allocation (csrc/shm/shared_buffer.cc). */
typedef enum {
  DT_ALLREDUCE = 1,
  DT_BROADCAST = 2,
  DT_ALLGATHER = 3,
  DT_REDUCE_SCATTER = 4,
  DT_BARRIER = 5,
  DT_EMPTY_SHARED = 6,
} dt_collective;

/* What a rank is about to do; every rank sends it to every other rank before any payload. */
typedef struct {
  uint64_t seq;
  uint64_t count; /* elements this rank sends */
  int32_t kind;   /* dt_collective */
  int32_t dtype;
  int32_t op;   /* reduce op, or -1 */
  int32_t root; /* broadcast root, or -1 */
} dt_fingerprint;

#ifdef __cplusplus
static_assert(sizeof(dt_fingerprint) == 32, "the fingerprint travels as 32 raw bytes");
#else
_Static_assert(sizeof(dt_fingerprint) == 32, "the fingerprint travels as 32 raw bytes");
#endif

/* "allReduce": the PyTorch name of a collective, as error messages give it. */
static inline const char *dt_collective_name(int32_t kind) {
  static const char *const names[] = {"unknown collective", "allReduce",     "broadcast",
                                      "allGather",          "reduceScatter", "barrier",
                                      "emptyShared"};
  return kind >= DT_ALLREDUCE && kind <= DT_EMPTY_SHARED ? names[kind] : names[0];
}

static inline const char *dt_dtype_name(int32_t dtype) {
  return dtype == DT_F32    ? "f32"
         : dtype == DT_I32  ? "i32"
         : dtype == DT_BF16 ? "bf16"
         : dtype == DT_F16  ? "f16"
                            : "?";
}

static inline const char *dt_reduce_op_name(int32_t op) {
  static const char *const names[] = {"sum", "avg", "min", "max", "prod"};
  return op >= DT_SUM && op <= DT_PROD ? names[op] : "?";
}

#ifdef __cplusplus
}  // namespace dtrain::collective
#endif
