// libdtrain's one declaration of its interface (csrc/core/dtrain.h) against what uses and builds
// it: the FFI table (ffi/dtrain.ts) symbol by symbol and type by type, and the exports of the built
// libraries (nm -D). The compiler checks the C and CUDA definitions against the same header.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dtrainSymbols } from "../../ffi/dtrain.ts";
import { abiMismatches, callable, type FfiEntry, parseHeader } from "./_c_header.ts";

const root = new URL("../../", import.meta.url);
const header = parseHeader(Deno.readTextFileSync(new URL("csrc/core/dtrain.h", root)));
const table = dtrainSymbols as unknown as Record<string, FfiEntry>;

Deno.test("dtrain.h declares each FFI symbol of libdtrain with the table's parameter and result types", () => {
  assert.ok(header.length > 60, `only ${header.length} prototypes parsed from dtrain.h`);
  assert.deepEqual(abiMismatches(header, table), []);
});

Deno.test("the ABI comparison reports a wrong type, a wrong count, a missing and an undeclared symbol", () => {
  const planted: Record<string, FfiEntry> = { ...table };
  planted.dt_axpy = { parameters: ["pointer", "pointer", "i64", "f64"], result: "i32" };
  planted.dt_abs = { parameters: ["pointer", "pointer"], result: "i32" };
  planted.dt_alloc = { parameters: ["i64", "i32"], result: "i64" };
  planted.dt_not_declared = { parameters: [], result: "void" };
  delete planted.dt_tril;
  assert.deepEqual(abiMismatches(header, planted).sort(), [
    "dt_abs: 2 parameters in the FFI table, 3 in the header (const float *, float *, int64_t)",
    'dt_alloc: returns void * in the header, "i64" in the FFI table',
    'dt_axpy: parameter 4 is float in the header, "f64" in the FFI table',
    "dt_not_declared: in the FFI table, not declared in the header",
    "dt_tril: declared in the header, missing from the FFI table",
  ]);
});

Deno.test("parseHeader reads multi-line, variadic, void and callback prototypes", () => {
  const parsed = parseHeader(`
    /* ---------------------------------------------------------------- pool.c (CPU only) */
    #define CHECK(c) \\
      do { } while (0)
    enum dt_e { DT_A = 0,
      DT_B = 1 };
    typedef void (*dt_task_fn)(void *ctx, int64_t i);
    int dt_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void *dt_alloc(int64_t nbytes,
                   int32_t zero);
    int64_t dt_count(void);
    void dt_run(int64_t n, dt_task_fn fn, void *ctx);`);
  assert.deepEqual(parsed.map((f) => [f.name, f.result, f.params, f.variadic, callable(f)]), [
    ["dt_fail", "int", ["int", "const char *"], true, false],
    ["dt_alloc", "void *", ["int64_t", "int32_t"], false, true],
    ["dt_count", "int64_t", [], false, true],
    ["dt_run", "void", ["int64_t", "dt_task_fn", "void *"], false, false],
  ]);
  assert.ok(parsed.every((f) => f.section === "pool.c (CPU only)"));
});

/** The dt_* functions a built library exports, or the reason they cannot be listed here. */
function exported(library: string): Set<string> | string {
  const path = fileURLToPath(new URL(`build/${library}`, root));
  if (!existsSync(path)) return `build/${library} is not built`;
  let out: Deno.CommandOutput;
  try {
    out = new Deno.Command("nm", { args: ["-D", "--defined-only", path] }).outputSync();
  } catch {
    return "nm is not installed";
  }
  if (!out.success) throw new Error(`nm -D ${path}: ${new TextDecoder().decode(out.stderr)}`);
  const names = new TextDecoder().decode(out.stdout).split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter(([, kind, name]) => kind === "T" && name?.startsWith("dt_"))
    .map(([, , name]) => name);
  return new Set(names);
}

/** Declares a test over a library's exports: ignored, with the reason in its name, when unbuilt. */
function exportsTest(library: string, fn: (names: Set<string>) => void): void {
  const names = exported(library);
  const name = `build/${library} exports what dtrain.h declares for it`;
  Deno.test({
    name: typeof names === "string" ? `${name} [skipped: ${names}]` : name,
    ignore: typeof names === "string",
    fn: () => fn(names as Set<string>),
  });
}

exportsTest("libdtrain.so", (names) => {
  const declared = new Set(header.map((f) => f.name));
  assert.deepEqual([...declared].filter((n) => !names.has(n)), [], "declared, not exported");
  assert.deepEqual([...names].filter((n) => !declared.has(n)), [], "exported, not declared");
});

// The CUDA library defines every kernel under libdtrain's name and declares its own runtime
// calls (dt_cuda_*, dt_nccl_*) elsewhere; only the CPU thread pool has no CUDA definition.
exportsTest("libdtrain_cuda.so", (names) => {
  const kernels = header.filter((f) => !f.section.includes("CPU only")).map((f) => f.name);
  assert.deepEqual(kernels.filter((n) => !names.has(n)), [], "declared, not exported");
});
