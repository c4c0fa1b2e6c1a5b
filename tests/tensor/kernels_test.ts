// The seam's kernel table (src/tensor/device/kernels.ts), derived from libdtrain's FFI table
// (ffi/dtrain.ts) by name: every library function is a kernel under its camelCased C name or one
// of the runtime's, and the cpu device's table holds the FFI functions themselves, so a kernel
// call is one native call.

import assert from "node:assert/strict";
import { getDevice, kernelSymbols } from "../../mod.ts";
import { dtrainSymbols, loadDtrain } from "../../ffi/dtrain.ts";
import { RUNTIME_SYMBOLS } from "../../src/tensor/device/kernels.ts";

/** `matmulBatched` as `dt_matmul_batched`, the other way round from the seam's derivation. */
const cName = (name: string) => `dt_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;

Deno.test("every libdtrain function is a seam kernel under its camelCased C name, or the runtime's", () => {
  const symbols: string[] = Object.values(kernelSymbols);
  const runtime: readonly string[] = RUNTIME_SYMBOLS;
  assert.deepEqual(
    Object.keys(dtrainSymbols).filter((s) => !symbols.includes(s) && !runtime.includes(s)),
    [],
    "libdtrain functions that are neither kernels nor the runtime's",
  );
  assert.deepEqual(symbols.filter((s) => runtime.includes(s)), []);
  for (const [name, symbol] of Object.entries(kernelSymbols)) assert.equal(cName(name), symbol);
  assert.equal(kernelSymbols.gatherU8F32, "dt_gather_u8_f32");
  assert.equal(kernelSymbols.matmulBatched, "dt_matmul_batched");
  assert.ok(symbols.length > 60, `only ${symbols.length} kernels`);
});

Deno.test("the cpu device's kernels are libdtrain's FFI functions themselves", () => {
  const lib = loadDtrain() as unknown as Record<string, unknown>;
  const kernels = getDevice("cpu").kernels as unknown as Record<string, unknown>;
  assert.deepEqual(Object.keys(kernels), Object.keys(kernelSymbols));
  for (const [name, symbol] of Object.entries(kernelSymbols)) {
    assert.equal(kernels[name], lib[symbol], `${name} is not ${symbol} itself`);
  }
});
