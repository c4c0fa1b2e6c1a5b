// libdtrain_cuda's own C ABI (csrc/cuda/dtrain_cuda.h: the CUDA runtime entry points and the NCCL
// shim) against ffi/cuda.ts, symbol by symbol and type by type; its kernels are libdtrain's, which
// abi_test.ts checks against csrc/core/dtrain.h. nvcc checks the definitions against the header.
import assert from "node:assert/strict";
import { cudaSymbols } from "../../ffi/cuda.ts";
import { abiMismatches, callable, type FfiEntry, parseHeader } from "./_c_header.ts";

const header = parseHeader(
  Deno.readTextFileSync(new URL("../../csrc/cuda/dtrain_cuda.h", import.meta.url)),
);
const table = cudaSymbols as unknown as Record<string, FfiEntry>;

Deno.test("dtrain_cuda.h declares each CUDA runtime and NCCL symbol of ffi/cuda.ts with its types", () => {
  assert.ok(header.length >= 25, `only ${header.length} prototypes parsed from dtrain_cuda.h`);
  for (const prefix of ["dt_cuda_", "dt_nccl_"]) {
    assert.deepEqual(abiMismatches(header, table, prefix), []);
  }
  const missing = header.filter((f) => callable(f) && !(f.name in table)).map((f) => f.name);
  assert.deepEqual(missing, [], "declared in dtrain_cuda.h, not in ffi/cuda.ts");
});
