/* oneDNN's bf16 matrix products for matmul_bf16.c, opened at run time (onednn.c). Internal to
 * libdtrain: hidden, so the library exports only what dtrain.h declares. */
#ifndef DTRAIN_ONEDNN_H
#define DTRAIN_ONEDNN_H

#include <stddef.h>
#include <stdint.h>

#define DT_INTERNAL __attribute__((visibility("hidden")))

/* The operands' element type: bf16 bits, or f32 where tests/tensor/onednn_f32_test.ts builds
 * onednn.c with -DDT_ONEDNN_F32_OPERANDS to run the same primitives, cache, cuts and scaling (all
 * but the element type) on CPUs where oneDNN has no bf16 kernels. */
#ifdef DT_ONEDNN_F32_OPERANDS
typedef float dt_onednn_operand;
#else
typedef uint16_t dt_onednn_operand;
#endif

/* Whether this CPU has bf16 dot-product instructions (avx512_bf16 or amx_bf16, by cpuid, with the
 * OS saving the AVX-512 state); when not, why in `why`. */
DT_INTERNAL int onednn_cpu_has_bf16(char *why, size_t len);

/* Checks the CPU, opens libdnnl.so.2 (onednn_load), checks oneDNN's ISA and runs a probe product;
 * DT_OK with what runs in `why`, or DT_EUNSUPPORTED with the reason. Call once (matmul_bf16.c
 * does, under pthread_once). */
DT_INTERNAL int onednn_open(char *why, size_t len);
/* Opens libdnnl.so.2, checks that it is oneDNN 2.x and makes its CPU engine; onednn_open's first
 * half, without the checks of bf16 support. DT_OK, or DT_EUNSUPPORTED with the reason in `why`. */
DT_INTERNAL int onednn_load(char *why, size_t len);
/* Frees the calling thread's scratchpad block (see [Note: oneDNN's scratchpad] in onednn.c). */
DT_INTERNAL void onednn_release_thread_scratch(void);

/* c_i = alpha * op(a_i) @ op(b_i) + beta * c_i for i < batch, bf16 a and b, f32 c, row-major with
 * leading dimensions and element strides between the batch's matrices (a stride of 0 repeats one
 * matrix); after onednn_open succeeded. Arguments are checked by the caller. */
DT_INTERNAL int onednn_matmul_bf16(const dt_onednn_operand *a, const dt_onednn_operand *b, float *c,
                                   int64_t batch,
                                   int64_t stride_a, int64_t stride_b, int64_t stride_c,
                                   int64_t m, int64_t n, int64_t k, int32_t trans_a,
                                   int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc,
                                   float alpha, float beta);

#endif
