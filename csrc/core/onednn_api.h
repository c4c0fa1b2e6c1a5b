/* oneDNN 2.x's C API as libdtrain declares it (the few types, constants and functions dtrain
 * calls), shared by onednn_load.c, which opens the library and fills `api`, and onednn.c, which
 * builds and runs the matmul primitives. Internal to libdtrain. */
#ifndef DTRAIN_ONEDNN_API_H
#define DTRAIN_ONEDNN_API_H

#include <stddef.h>
#include <stdint.h>

#include "half_math.h"
#include "onednn.h"

/* ---------------------------------------------------------------- oneDNN 2.x, as declared */

typedef int64_t dnnl_dims_t[12]; /* DNNL_MAX_NDIMS */
/* dnnl_memory_desc_t (696 bytes in 2.6) and dnnl_matmul_desc_t (2800) are plain structs that the
 * library fills and copies; opaque storage larger than any 2.x layout holds them. */
typedef struct { _Alignas(16) unsigned char bytes[1024]; } memory_desc;
typedef struct { _Alignas(16) unsigned char bytes[4096]; } matmul_desc;
typedef struct { int arg; void *memory; } exec_arg; /* dnnl_exec_arg_t */
typedef struct { int major, minor, patch; const char *hash; unsigned cpu_runtime, gpu_runtime; } version_t;

enum { DNNL_SUCCESS = 0, DNNL_BF16 = 2, DNNL_F32 = 3, DNNL_CPU = 1, DNNL_STREAM_IN_ORDER = 1 };
enum { DNNL_ARG_SRC = 1, DNNL_ARG_DST = 17, DNNL_ARG_WEIGHTS = 33, DNNL_ARG_SCRATCHPAD = 80 };
enum { QUERY_IMPL_INFO_STR = 8, QUERY_SCRATCHPAD_MD = 136, SCRATCHPAD_MODE_USER = 1 };
enum { ISA_AVX512_CORE_BF16 = 0xe7 }; /* dnnl_cpu_isa_t: a mask, AMX's includes it */
#ifdef DT_ONEDNN_F32_OPERANDS /* see onednn.h */
#define OPERAND_TYPE DNNL_F32
static inline dt_onednn_operand operand_of(float v) { return v; }
static inline float value_of(dt_onednn_operand x) { return x; }
#else
#define OPERAND_TYPE DNNL_BF16
static inline dt_onednn_operand operand_of(float v) { return dt_f32_to_bf16(v); }
static inline float value_of(dt_onednn_operand x) { return dt_bf16_to_f32(x); }
#endif

/* oneDNN's C API as onednn_load resolved it (onednn_load.c), and its CPU engine. */
DT_INTERNAL extern struct onednn_api {
  int (*engine_create)(void **engine, int kind, size_t index);
  int (*stream_create)(void **stream, void *engine, unsigned flags);
  int (*stream_wait)(void *stream);
  int (*stream_destroy)(void *stream);
  int (*md_init_by_strides)(memory_desc *md, int ndims, const int64_t *dims, int type,
                            const int64_t *strides);
  int (*matmul_desc_init)(matmul_desc *desc, const memory_desc *src, const memory_desc *weights,
                          const memory_desc *bias, const memory_desc *dst);
  int (*pd_create)(void **pd, const void *op_desc, const void *attr, void *engine, const void *hint);
  int (*pd_query)(const void *pd, int what, int index, void *result);
  const memory_desc *(*pd_query_md)(const void *pd, int what, int index);
  size_t (*md_get_size)(const memory_desc *md);
  int (*attr_create)(void **attr);
  int (*attr_set_scratchpad_mode)(void *attr, int mode);
  int (*attr_destroy)(void *attr);
  int (*pd_destroy)(void *pd);
  int (*primitive_create)(void **primitive, const void *pd);
  int (*primitive_execute)(const void *primitive, void *stream, int nargs, const exec_arg *args);
  int (*primitive_destroy)(void *primitive);
  int (*memory_create)(void **memory, const memory_desc *md, void *engine, void *handle);
  int (*memory_destroy)(void *memory);
  const version_t *(*version)(void);
  int (*effective_cpu_isa)(void);
  void (*omp_set_num_threads)(int n); /* libgomp's, which Debian's oneDNN runs on; optional */
  void *engine;
} api;

#endif
