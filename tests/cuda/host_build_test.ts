// The host build of the CUDA library (make cuda-host; [Note: the host build] in
// csrc/cuda/host/cuda_runtime.h) stands in for the GPU in CI, so it has to be the same library and
// catch what a GPU would show. It exports exactly what libdtrain_cuda.so exports, every symbol of
// ffi/cuda.ts's table among them. Three bugs, planted one at a time in mutants rebuilt from the
// build's own objects (only the changed file recompiles), each fail an existing GPU test on a wrong
// result that the unchanged library passes: a missing barrier in block_sum, a missing stream wait
// after the pinned copies, an off-by-one column bound in layer norm. Under AddressSanitizer (make
// cuda-host-asan) the kernel tests pass, and a planted out-of-bounds read is reported naming its
// kernel. Deno is not instrumented, so the child `deno test` gets the sanitizer runtimes through
// LD_PRELOAD (ASan must be the first library of the process) with leak detection off (Deno's own
// allocations live until exit); nothing else is needed for the dlopen'd library to run checked.
// Children run with the runtime's default seed, devices and copy delay, whatever this process has.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { cudaSymbols } from "../../ffi/cuda.ts";
import { kernelSymbols } from "../../mod.ts";
import { hasCommand } from "../infrastructure/shell.ts";
import {
  denoTest,
  FLAVORS,
  type Mutation,
  type Output,
  ROOT,
  run,
  sanitizerRuntimes,
  withMutant,
} from "./host/mutant.ts";

const HOST_LIB = join(ROOT, FLAVORS.host.lib);
const ASAN_LIB = join(ROOT, FLAVORS.asan.lib);
const GPU_LIB = join(ROOT, "build/libdtrain_cuda.so");

/** Why tests that need `tools` and the `flavor` library cannot run here ("" when they can). */
function whyNot(tools: string[], flavor: "host" | "asan"): string {
  const missing = tools.filter((tool) => !hasCommand(tool));
  if (missing.length > 0) return `${missing.join(" and ")} not found`;
  if (!existsSync(join(ROOT, FLAVORS[flavor].lib))) {
    return `${FLAVORS[flavor].lib} is not built (make ${FLAVORS[flavor].target})`;
  }
  return "";
}
const noExports = whyNot(["nm"], "host");
const noHost = whyNot(["make", "c++"], "host");
const preload = hasCommand("c++") ? await sanitizerRuntimes() : null;
const noAsan = whyNot(["make", "c++", "ldd"], "asan") ||
  (preload === null ? "the C++ compiler has no libasan and libubsan" : "");
// The Makefile's own search for nvcc (tests/cuda/build_test.ts): where it is, the GPU library is
// built by `make build`.
const hasNvcc = hasCommand("nvcc") || existsSync("/usr/local/cuda/bin/nvcc");

/** `name`, with the reason it is skipped appended when there is one. */
function named(name: string, skip: string): { name: string; ignore: boolean } {
  return { name: skip ? `${name} [skipped: ${skip}]` : name, ignore: skip !== "" };
}

/** The defined dynamic symbols of `lib`, one "TYPE NAME" each, sorted. */
async function exports(lib: string): Promise<string[]> {
  const { code, out } = await run("nm", ["-D", "--defined-only", lib], { timeoutMs: 30_000 });
  assert.equal(code, 0, out);
  return out.trim().split("\n").map((line) => line.split(/\s+/).slice(1).join(" ")).sort();
}

/** Asserts that the child ran the test `name` and it passed. */
function assertPassed(result: Output, name: string): void {
  assert.ok(result.out.includes(`${name} ... ok`), `"${name}" did not pass:\n${result.out}`);
  assert.equal(result.code, 0, result.out);
}

/**
 * Asserts that the child's test `name` failed on an assertion: the runner finished and named it,
 * so the library loaded and nothing crashed.
 */
function assertFailedOnAssertion(result: Output, name: string): void {
  assert.equal(result.code, 1, `expected a failed test, not exit ${result.code}:\n${result.out}`);
  assert.ok(result.out.includes(`${name} ... FAILED`), `"${name}" did not fail:\n${result.out}`);
  assert.match(result.out, /^error: AssertionError/m);
  assert.match(result.out, /^FAILED \| 0 passed \| 1 failed/m);
}

Deno.test({
  ...named("the host build exports every symbol of ffi/cuda.ts's table, all dt_*", noExports),
  fn: async () => {
    const names = (await exports(HOST_LIB)).map((entry) => entry.split(" ")[1]);
    assert.deepEqual(names.filter((name) => !name.startsWith("dt_")), []);
    // An optional symbol (OpenBLAS's core name) is one the library may lack.
    const required = Object.entries(cudaSymbols).filter(([, def]) => !("optional" in def));
    const wanted = new Set([...required.map(([name]) => name), ...Object.values(kernelSymbols)]);
    assert.ok(wanted.size > 60, `only ${wanted.size} symbols in the table`);
    assert.deepEqual([...wanted].filter((name) => !names.includes(name)), []);
  },
});

Deno.test({
  ...named(
    "the host build exports exactly what build/libdtrain_cuda.so exports",
    noExports || (hasNvcc ? "" : "nvcc not found, so build/libdtrain_cuda.so is not built here"),
  ),
  fn: async () => {
    assert.ok(existsSync(GPU_LIB), `${GPU_LIB} is missing though nvcc is here (make build)`);
    assert.deepEqual(await exports(HOST_LIB), await exports(GPU_LIB));
  },
});

/** A planted bug and the GPU test that must fail on it. */
interface PlantedBug {
  what: string;
  mutation: Mutation;
  file: string;
  test: string;
}

const BUGS: PlantedBug[] = [{
  what: "block_sum reads the warps' sums without the barrier after they are written",
  mutation: {
    file: "csrc/cuda/internal.cuh",
    from: "  if (lane == 0) shared[warp] = v;\n  __syncthreads();\n" +
      "  v = lane < warps ? shared[lane] : T(0);",
    to: "  if (lane == 0) shared[warp] = v;\n  v = lane < warps ? shared[lane] : T(0);",
    // sum() runs reduce.cu's kernels; block_sum is always inlined, so no other object matters.
    rebuild: ["csrc/cuda/reduce.cu"],
  },
  file: "tests/cuda/reductions_test.ts",
  test: "sum() of 3M elements on cuda matches cpu and repeats exactly",
}, {
  what: "the compute stream does not wait for a pinned batch's copies",
  mutation: {
    file: "csrc/cuda/pinned.cu",
    from: "  cudaCheck(cudaStreamWaitEvent(dev->compute, slot->copied, 0));\n",
    to: "",
  },
  // A loss computed on each batch as the loader yields it. (pin_memory_cuda_test.ts's "a kernel
  // queued right after a batch arrives" collects every batch before its first sum, by which time
  // the copies have landed, so it passes on this mutant.)
  file: "tests/nn/module_to_cuda_test.ts",
  test: "a bare family name is device 0 for models, tensors and the DataLoader [cuda]",
}, {
  what: "layer norm's mean leaves out each row's last column",
  mutation: {
    file: "csrc/cuda/nn.cu",
    from: "c < cols; c += blockDim.x) s += in[c];",
    to: "c < cols - 1; c += blockDim.x) s += in[c];",
  },
  file: "tests/tensor/ops_cuda_test.ts",
  test: "layerNorm on the accelerator matches cpu (rel err <= 0.00001) [cuda]",
}];

for (const bug of BUGS) {
  Deno.test({
    ...named(`a planted bug fails a GPU test on the host build: ${bug.what}`, noHost),
    fn: async () => {
      assertPassed(await denoTest(HOST_LIB, bug.file, bug.test), bug.test);
      await withMutant("host", bug.mutation, async (lib) => {
        assertFailedOnAssertion(await denoTest(lib, bug.file, bug.test), bug.test);
      });
    },
  });
}

Deno.test({
  ...named("the kernel tests of ops_cuda_test.ts pass under AddressSanitizer", noAsan),
  fn: async () => {
    const ldd = await run("ldd", [ASAN_LIB], { timeoutMs: 30_000 });
    assert.match(ldd.out, /libasan\.so/, `${ASAN_LIB} is not instrumented:\n${ldd.out}`);
    const result = await denoTest(ASAN_LIB, "tests/tensor/ops_cuda_test.ts", "[cuda]", preload!);
    assert.doesNotMatch(result.out, /Sanitizer|runtime error/);
    assert.equal(result.code, 0, result.out);
    assert.match(result.out, /^ok \| (\d{2,}) passed \| 0 failed/m);
  },
});

Deno.test({
  ...named("AddressSanitizer names the kernel of a planted out-of-bounds read", noAsan),
  fn: async () => {
    const file = "tests/tensor/ops_cuda_test.ts";
    // 64 x 64 f32 elements: 16 KiB, a multiple of the 256 bytes the runtime rounds blocks up to,
    // so the element past the end lies in ASan's redzone and not in the rounding.
    const test = "dropout keeps the cpu's elements (same counter RNG) on the accelerator " +
      "matches cpu (rel err <= 0.00001) [cuda]";
    assertPassed(await denoTest(ASAN_LIB, file, test, preload!), test);
    const mutation = {
      file: "csrc/cuda/nn.cu",
      from: "GRID_LOOP(i, n) y[i] = dt_dropout_keeps",
      to: "GRID_LOOP(i, n + 1) y[i] = dt_dropout_keeps",
    };
    await withMutant("asan", mutation, async (lib) => {
      const result = await denoTest(lib, file, test, preload!);
      assert.notEqual(result.code, 0, result.out);
      assert.match(result.out, /ERROR: AddressSanitizer: heap-buffer-overflow/);
      assert.match(
        result.out,
        /SUMMARY: AddressSanitizer: heap-buffer-overflow \S*nn\.cu:\d+ in dropout_kernel/,
      );
    });
  },
});
