// The seam's kernel table (src/tensor/device/kernels.ts) against libdtrain's FFI table
// (ffi/dtrain.ts): every kernel the library exports is in the seam under one name, and the cpu
// device's table holds the FFI functions themselves, so a kernel call is one native call.

import assert from "node:assert/strict";
import { getDevice, kernelSymbols } from "../../mod.ts";
import { dtrainSymbols, loadDtrain } from "../../ffi/dtrain.ts";

/** libdtrain's functions that are not kernels: errors, the allocator, copies, the thread pool. */
const RUNTIME = [
  "dt_last_error",
  "dt_alloc",
  "dt_free",
  "dt_allocated_bytes",
  "dt_allocated_blocks",
  "openblas_get_corename",
  "dt_set_num_threads",
  "dt_get_num_threads",
  "dt_copy",
];

Deno.test("every libdtrain function is a seam kernel, once, or one of the runtime's", () => {
  const symbols: string[] = Object.values(kernelSymbols);
  assert.deepEqual(symbols.filter((s, i) => symbols.indexOf(s) !== i), [], "a symbol twice");
  assert.deepEqual(
    Object.keys(dtrainSymbols).filter((s) => !symbols.includes(s) && !RUNTIME.includes(s)),
    [],
    "libdtrain functions missing from kernels.ts",
  );
  assert.deepEqual(symbols.filter((s) => RUNTIME.includes(s)), []);
});

Deno.test("the cpu device's kernels are libdtrain's FFI functions themselves", () => {
  const lib = loadDtrain() as unknown as Record<string, unknown>;
  const kernels = getDevice("cpu").kernels as unknown as Record<string, unknown>;
  assert.deepEqual(Object.keys(kernels), Object.keys(kernelSymbols));
  for (const [name, symbol] of Object.entries(kernelSymbols)) {
    assert.equal(kernels[name], lib[symbol], `${name} is not ${symbol} itself`);
  }
});
