// The CUDA library's build, checked on every machine: where nvcc is, `make build` made
// build/libdtrain_cuda.so, which opens cuBLAS and NCCL at run time and so links neither; where
// it is not, the Makefile skips the library with one line saying why. A library named by
// DTRAIN_CUDA_LIB (scripts/gpu_check.sh's carried build, on a machine that cannot build) is the
// one checked then.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { kernelSymbols } from "../../mod.ts";
import { probeCuda } from "../../src/tensor/device/cuda_runtime.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** The real library: build/'s where nvcc built it, else the carried one DTRAIN_CUDA_LIB names. */
const BUILT = `${ROOT}build/libdtrain_cuda.so`;
const LIBRARY = existsSync(BUILT) ? BUILT : Deno.env.get("DTRAIN_CUDA_LIB") || BUILT;

async function sh(script: string): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await new Deno.Command("sh", {
    args: ["-c", script],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code, out: text.decode(stdout) + text.decode(stderr) };
}

// The Makefile's own search, so the test skips exactly where the build did.
const nvcc = (await sh("command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null")).out.trim();
const built = nvcc !== "" || Deno.env.get("DTRAIN_CUDA_LIB") !== undefined;
const make = (await sh("command -v make")).out.trim();

Deno.test({
  name: `build/libdtrain_cuda.so exists and links neither cuBLAS nor NCCL${
    built ? "" : " [skipped: nvcc not found, so the library is not built here]"
  }`,
  ignore: !built,
}, async () => {
  const ldd = await sh(`ldd ${LIBRARY}`);
  assert.equal(ldd.code, 0, ldd.out);
  assert.doesNotMatch(ldd.out, /cublas|nccl/i);
  // The CUDA runtime is static: no libcudart either, so the library loads where no toolkit is.
  assert.doesNotMatch(ldd.out, /libcudart|libcuda\.so/);
  // Opening it checks every symbol of ffi/cuda.ts (libdtrain's kernels included) is exported.
  assert.notEqual(probeCuda().lib, null, probeCuda().reason);
});

Deno.test({
  name: `every kernel of the seam has a libdtrain_cuda function of its C name${
    built ? "" : " [skipped: nvcc not found, so the library is not built here]"
  }`,
  ignore: !built,
}, () => {
  const lib = probeCuda().lib as unknown as Record<string, unknown>;
  const symbols = Object.values(kernelSymbols);
  assert.ok(symbols.length > 30);
  assert.deepEqual(symbols.filter((symbol) => typeof lib[symbol] !== "function"), []);
  assert.equal(kernelSymbols.gatherU8F32, "dt_gather_u8_f32");
});

Deno.test({
  name: `without nvcc the Makefile skips the CUDA library with one line saying why${
    make ? "" : " [skipped: make not found]"
  }`,
  ignore: make === "",
}, async () => {
  const run = await sh("make -s cuda NVCC=");
  assert.equal(run.code, 0, run.out);
  assert.equal(
    run.out,
    "cuda: skipping build/libdtrain_cuda.so: nvcc not found (put it on PATH or pass NVCC=/path/to/nvcc)\n",
  );
});

// Deno unloads a library when the worker that opened it ends (`deno test` runs each file in its
// own), but the CUDA library's threads (the CUDA runtime's, NCCL's, the host build's streams) live
// on: with the library unmapped under them, the next test file crashed. Both builds are linked
// with -z nodelete, which dlclose honours.
Deno.test({
  name: `the CUDA library and its host build stay loaded once opened (-z nodelete)${
    built ? "" : " [skipped: nvcc not found, so the library is not built here]"
  }`,
  ignore: !built,
}, async () => {
  for (const library of [LIBRARY, `${ROOT}build/libdtrain_cuda_host.so`]) {
    if (library.endsWith("_host.so") && !existsSync(library)) continue;
    const dynamic = await sh(`readelf -dW ${library}`);
    assert.equal(dynamic.code, 0, dynamic.out);
    assert.match(dynamic.out, /FLAGS_1\)\s+Flags:.*\bNODELETE\b/, `${library}:\n${dynamic.out}`);
  }
});
