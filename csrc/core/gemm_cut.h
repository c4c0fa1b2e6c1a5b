/* How a matrix product is cut into blocks for the thread pool, written once for the f32 products
 * (matmul.c) and the f32 products of bf16 values (matmul_bf16.c): the same cut makes the same
 * sgemm calls, which is how a bf16 product gets dt_matmul's bits. */
#ifndef DTRAIN_GEMM_CUT_H
#define DTRAIN_GEMM_CUT_H

#include <stdint.h>

/* Products under this many flops run whole on the calling thread: handing off costs more. */
#define MIN_PARALLEL_FLOPS 4e6
/* Blocks are cut at multiples of this many rows or columns (the sgemm kernels' tile). */
#define BLOCK_ALIGN 16
#define MAX_BLOCKS 128

/* How many blocks an [m, k] @ [k, n] product is worth cutting into for `threads` threads. */
static inline int gemm_cut_parts(int64_t m, int64_t n, int64_t k, int threads) {
  if (threads <= 1 || 2.0 * (double)m * (double)n * (double)k < MIN_PARALLEL_FLOPS) return 1;
  int64_t dim = n >= m ? n : m;
  int64_t most = (dim + BLOCK_ALIGN - 1) / BLOCK_ALIGN;
  return most < threads ? (int)most : threads;
}

/* Block `part` of `parts` along a dimension of `dim`: [*start, *end), aligned, possibly empty. */
static inline void gemm_cut_block(int64_t dim, int part, int parts, int64_t *start, int64_t *end) {
  int64_t step = (dim + parts - 1) / parts;
  step = (step + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
  *start = part * step < dim ? part * step : dim;
  *end = *start + step < dim ? *start + step : dim;
}

#endif
