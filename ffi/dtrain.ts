/**
 * The symbol table of `libdtrain.so` (csrc/core): the CPU kernels behind tensors, autograd, the
 * optimizers and data loading. Every function returning `i32` returns a status (0 = ok); the
 * message of a failure is read with `dt_last_error`. The table comes in two halves by kernel family
 * (dtrain_symbols_core.ts, dtrain_symbols_ops.ts); the ABI enums (csrc/core/dtrain.h) follow it.
 * @module
 */

import { openLibrary, type Symbols } from "./load.ts";
import { preferOpenblasCore } from "./openblas_core.ts";
import { coreSymbols } from "./dtrain_symbols_core.ts";
import { opsSymbols } from "./dtrain_symbols_ops.ts";

const symbols = { ...coreSymbols, ...opsSymbols } as const satisfies Deno.ForeignLibraryInterface;

/** The functions of `libdtrain.so` (64-bit sizes take numbers: [Note: 64-bit integers] in load.ts). */
export type DtrainSymbols = Symbols<typeof symbols>;

let opened: DtrainSymbols | undefined;

/**
 * Opens `libdtrain.so` once per process, on first call: `DTRAIN_LIB` if set, else `build/`, after
 * choosing OpenBLAS's kernels (ffi/openblas_core.ts). Only the cpu device
 * (src/tensor/device/cpu.ts) calls it; everything else goes through the device.
 *
 * @returns The library's functions.
 * @throws Error naming the paths tried and saying to run `make build`.
 */
export function loadDtrain(): DtrainSymbols {
  if (opened === undefined) {
    preferOpenblasCore(); // before libopenblas loads with libdtrain: it reads the variable then
    opened = openLibrary("libdtrain.so", "DTRAIN_LIB", symbols);
  }
  return opened;
}

/** Status codes returned by the native functions (csrc/core/dtrain.h). */
export const Status = { OK: 0, EINVAL: 1, ENOMEM: 2, EUNSUPPORTED: 3 } as const;

/** Elementwise binary ops (enum dt_binary_op). */
export const BinaryOp = { add: 0, sub: 1, mul: 2, div: 3 } as const;

/** Elementwise unary ops (enum dt_unary_op). */
export const UnaryOp = {
  relu: 0,
  geluTanh: 1,
  geluErf: 2,
  exp: 3,
  log: 4,
  tanh: 5,
  sigmoid: 6,
  neg: 7,
  sqrt: 8,
  pow: 9,
  scale: 10,
  addScalar: 11,
} as const;

/** Comparisons (enum dt_compare_op in csrc/core/compare.c). */
export const CompareOp = { eq: 0, ne: 1, lt: 2, le: 3, gt: 4, ge: 5 } as const;

/** Element types as the kernels number them (enum dt_dtype in csrc/core/compare.c). */
export const DTypeCode = { f32: 0, i32: 1, bool: 2 } as const;

/** The symbol table itself: libdtrain_cuda.so exports the same kernels (ffi/cuda.ts shares it). */
export { symbols as dtrainSymbols };
