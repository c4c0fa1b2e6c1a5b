/**
 * Mutants of the CUDA library's host build, for tests/cuda/host_build_test.ts: a copy of the
 * sources and of the objects the repository's build left, one text replaced, rebuilt by the
 * Makefile so that only what the change touches recompiles; and the GPU tests of tests/cuda run
 * against a chosen library in a child `deno test`.
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT: string = fileURLToPath(new URL("../../../", import.meta.url));

/** The two host builds: the plain one (`make cuda-host`) and the sanitized one. */
export const FLAVORS = {
  host: { target: "cuda-host", objects: "build/cuda_host", lib: "build/libdtrain_cuda_host.so" },
  asan: {
    target: "cuda-host-asan",
    objects: "build/cuda_host_asan",
    lib: "build/libdtrain_cuda_host_asan.so",
  },
} as const;

/** A host build's name. */
export type Flavor = keyof typeof FLAVORS;

/** The cuBLAS and NCCL stand-ins every run opens (tests/cuda/host/cublas, nccl). */
const STANDINS = {
  DTRAIN_CUBLAS_LIB: join(ROOT, "build/cuda_host/libcublas_standin.so"),
  DTRAIN_NCCL_LIB: join(ROOT, "build/cuda_host/libnccl_standin.so"),
};

/** A process's exit and its stdout and stderr together. */
export interface Output {
  code: number;
  out: string;
}

/**
 * Runs `command` with `args`, killed (SIGTERM) after `timeoutMs`.
 *
 * @param command The program.
 * @param args Its arguments.
 * @param options The working folder, the environment, and the time limit.
 * @returns Its exit code and output.
 * @throws Error saying that it ran past its limit.
 */
export async function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string>; timeoutMs: number },
): Promise<Output> {
  const { code, signal, stdout, stderr } = await new Deno.Command(command, {
    args,
    cwd: options.cwd ?? ROOT,
    clearEnv: options.env !== undefined,
    env: options.env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(options.timeoutMs),
  }).output();
  const text = new TextDecoder();
  const out = text.decode(stdout) + text.decode(stderr);
  if (signal === "SIGTERM") {
    throw new Error(`${command} ${args.join(" ")}: killed after ${options.timeoutMs} ms\n${out}`);
  }
  return { code, out };
}

/** One planted bug: `from` replaced by `to` in `file`. */
export interface Mutation {
  /** The file changed, relative to the repository root. */
  file: string;
  /** The text replaced, which must occur exactly once. */
  from: string;
  to: string;
  /**
   * For a header: the sources (relative paths) whose objects are rebuilt. Every object depends
   * on every header in the Makefile, so without this a header change would recompile them all.
   */
  rebuild?: string[];
}

/**
 * Builds the `flavor` library with `mutation` planted, in a temp tree, and calls `fn` with its
 * path; the tree is removed afterwards. The tree holds copies (timestamps kept) of csrc/, the
 * Makefile, the stand-in sources and the objects and stand-ins the repository's build left, so
 * that make recompiles only the changed file and relinks.
 *
 * @param flavor The host build to mutate.
 * @param mutation The bug.
 * @param fn The check, given the mutant library.
 * @throws AssertionError when `mutation.from` does not occur exactly once, or with make's output
 * when the build fails.
 */
export async function withMutant(
  flavor: Flavor,
  mutation: Mutation,
  fn: (lib: string) => Promise<void>,
): Promise<void> {
  const { target, objects, lib } = FLAVORS[flavor];
  // -o and -W are not passed down to a recursive make (cuda-host-asan is one).
  assert.ok(!(mutation.rebuild && flavor === "asan"), "header mutants need the plain host build");
  const tree = await Deno.makeTempDir({ prefix: "dtrain_mutant_" });
  try {
    const copy = await run("sh", [
      "-c",
      'set -e; mkdir -p "$1/$2" "$1/build/cuda_host" "$1/tests/cuda"; ' +
      'cp -rp csrc Makefile "$1/"; ' +
      'cp -rp tests/cuda/host "$1/tests/cuda/"; cp -p "$2"/*.o "$1/$2/"; ' +
      'cp -p build/cuda_host/*.so "$1/build/cuda_host/"',
      "sh",
      tree,
      objects,
    ], { timeoutMs: 60_000 });
    assert.equal(copy.code, 0, copy.out);

    const path = join(tree, mutation.file);
    const text = await Deno.readTextFile(path);
    const found = text.split(mutation.from).length - 1;
    assert.equal(found, 1, `${mutation.file}: the text to mutate occurs ${found} times, not once`);
    await Deno.writeTextFile(path, text.replace(mutation.from, mutation.to));

    const pinned = mutation.rebuild
      ? ["-o", mutation.file, ...mutation.rebuild.flatMap((source) => ["-W", source])]
      : [];
    const make = await run("make", ["-s", ...pinned, target], { cwd: tree, timeoutMs: 180_000 });
    assert.equal(make.code, 0, `make ${target} of the mutant failed:\n${make.out}`);
    await fn(join(tree, lib));
  } finally {
    await Deno.remove(tree, { recursive: true });
  }
}

/** Where the sanitizer runtimes of the C++ compiler are, or null where it has none. */
export async function sanitizerRuntimes(): Promise<string[] | null> {
  const paths: string[] = [];
  for (const name of ["libasan.so", "libubsan.so"]) {
    const { code, out } = await run("c++", [`-print-file-name=${name}`], { timeoutMs: 10_000 });
    // Without the library the compiler echoes the bare name.
    if (code !== 0 || !out.trim().startsWith("/")) return null;
    paths.push(await Deno.realPath(out.trim()));
  }
  return paths;
}

/**
 * Runs the one test `name` of `file` (relative to the repository root) in a child `deno test`
 * against `lib`, with the stand-ins, the runtime's default knobs (no DTRAIN_CUDA_HOST_* from this
 * process: the seed, the devices and the copy delay the suite uses), and, given `preload`, those
 * libraries preloaded and AddressSanitizer set for a host that is not instrumented.
 *
 * @param lib The CUDA library.
 * @param file The test file.
 * @param name The test's full name (or a substring of the names of the tests to run).
 * @param preload The sanitizer runtimes to preload.
 * @returns The child's exit code and output.
 */
export function denoTest(
  lib: string,
  file: string,
  name: string,
  preload?: string[],
): Promise<Output> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(Deno.env.toObject())) {
    if (!/^(DTRAIN_CUDA_|DTRAIN_CUBLAS_|DTRAIN_NCCL_|LD_PRELOAD$|ASAN_|UBSAN_)/.test(key)) {
      env[key] = value;
    }
  }
  Object.assign(env, STANDINS, { DTRAIN_CUDA_LIB: lib, NO_COLOR: "1" });
  if (preload) {
    // The runtime must come first in the process, and Deno's own allocations, never freed before
    // exit, are no finding.
    Object.assign(env, {
      LD_PRELOAD: preload.join(" "),
      ASAN_OPTIONS: "detect_leaks=0",
      UBSAN_OPTIONS: "print_stacktrace=1",
    });
  }
  // --no-check: the suite type-checks these files; a child only runs them.
  return run(Deno.execPath(), ["test", "-A", "--no-check", "--filter", name, join(ROOT, file)], {
    env,
    timeoutMs: 120_000,
  });
}
