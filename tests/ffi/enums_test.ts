// Every number of the native ABIs is a member of a named C enum in a header, and ffi/ numbers it
// again for the TypeScript side (the FFI cannot read a C enum). This test holds each pair to the
// same names and numbers, so that a code added to one side and not the other fails here, not as a
// wrong kernel or a misread status; and it holds each C enum type to one name and one declaration.
import assert from "node:assert/strict";
import {
  BinaryOp,
  CompareOp,
  DTypeCode,
  MapAccess,
  ReductionCode,
  Status,
  UnaryOp,
} from "../../ffi/dtrain.ts";
import { CudaLibrary, CudaStatus, MatmulPrecision } from "../../ffi/cuda.ts";
import {
  CollectiveDType,
  CollectiveReduceOp,
  CollectiveStatus,
  P2PKind,
} from "../../ffi/collective_codes.ts";
import { type CEnum, enumMembers, parseEnums } from "./_c_header.ts";

const csrc = new URL("../../csrc/", import.meta.url);
const enumsOf = (...files: string[]): CEnum[] =>
  files.flatMap((file) => parseEnums(Deno.readTextFileSync(new URL(file, csrc))));

// libdtrain's: the ops' enums sit in scalar_math.h beside their formulas, the rest in dtrain.h.
const core = enumsOf("core/dtrain.h", "core/scalar_math.h");
const cuda = enumsOf("cuda/dtrain_cuda.h");
const collective = enumsOf("gloo/collective_codes.h");

/** GELU_TANH -> geluTanh; REDUCTION_MEAN with prefix REDUCTION_ -> mean. */
const camel = (prefix = "") => (member: string) =>
  member.slice(prefix.length).toLowerCase().replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
const asIs = (member: string) => member;

Deno.test("ffi/dtrain.ts numbers each enum of libdtrain as csrc/core/dtrain.h and scalar_math.h do", () => {
  assert.deepEqual({ ...Status }, enumMembers(core, "dt_status", asIs));
  assert.deepEqual({ ...BinaryOp }, enumMembers(core, "dt_binary_op", camel()));
  assert.deepEqual({ ...UnaryOp }, enumMembers(core, "dt_unary_op", camel()));
  assert.deepEqual({ ...CompareOp }, enumMembers(core, "dt_compare_op", camel()));
  assert.deepEqual({ ...DTypeCode }, enumMembers(core, "dt_dtype", camel()));
  assert.deepEqual({ ...ReductionCode }, enumMembers(core, "dt_reduction", camel("REDUCTION_")));
  assert.deepEqual({ ...MapAccess }, enumMembers(core, "dt_map_access", camel("MAP_")));
});

Deno.test("ffi/cuda.ts numbers each enum of libdtrain_cuda as csrc/cuda/dtrain_cuda.h does", () => {
  assert.deepEqual({ ...CudaStatus }, enumMembers(core, "dt_status", asIs));
  assert.deepEqual(
    { ...MatmulPrecision },
    enumMembers(cuda, "dt_matmul_precision", camel("MATMUL_PRECISION_")),
  );
  assert.deepEqual(
    { ...CudaLibrary },
    enumMembers(cuda, "dt_cuda_library", camel("CUDA_LIBRARY_")),
  );
});

Deno.test("ffi/collective_codes.ts numbers each collective code as csrc/gloo/collective_codes.h does", () => {
  assert.deepEqual({ ...CollectiveStatus }, enumMembers(collective, "dt_collective_status", asIs));
  assert.deepEqual({ ...CollectiveDType }, enumMembers(collective, "dt_collective_dtype", camel()));
  assert.deepEqual(
    { ...CollectiveReduceOp },
    enumMembers(collective, "dt_collective_reduce_op", camel()),
  );
  assert.deepEqual({ ...P2PKind }, enumMembers(collective, "dt_p2p_kind", camel("P2P_")));
  // A buffer's dtype code is libdtrain's whichever library it goes to.
  for (const [name, code] of Object.entries(CollectiveDType)) {
    assert.equal(DTypeCode[name as keyof typeof DTypeCode], code, name);
  }
});

/** The C and CUDA headers under `dir`, as paths relative to it. */
function headers(dir: URL, prefix = ""): string[] {
  return [...Deno.readDirSync(new URL(prefix, dir))].flatMap((entry) => {
    const path = `${prefix}${entry.name}`;
    if (entry.isDirectory) return headers(dir, `${path}/`);
    return /\.(h|cuh)$/.test(entry.name) ? [path] : [];
  });
}

Deno.test("each enum type of csrc's headers has one name and one declaration", () => {
  const declared = new Map<string, string[]>();
  for (const file of headers(csrc)) {
    for (const { name } of parseEnums(Deno.readTextFileSync(new URL(file, csrc)))) {
      declared.set(name, [...declared.get(name) ?? [], file]);
    }
  }
  const twice = [...declared].filter(([, files]) => files.length > 1);
  assert.deepEqual(twice, [], "enum types declared more than once");
  for (const name of ["dt_status", "dt_dtype", "dt_collective_status", "dt_collective_dtype"]) {
    assert.ok(declared.has(name), `no header declares ${name}`);
  }
});

Deno.test("the enum reader reads both forms, skips anonymous enums and refuses what it cannot read", () => {
  const enums = parseEnums(`
    enum dt_a { DT_X = 0, /* why */ DT_Y_Z = 2 };
    typedef enum {
      DT_P = 1,  // trailing
    } dt_b;
    enum { HIDDEN = 3 };
    enum dt_c { DT_Q = 1 << 2 };`);
  assert.deepEqual(enums.map((e) => e.name), ["dt_a", "dt_b", "dt_c"]);
  assert.deepEqual(enumMembers(enums, "dt_a", camel()), { x: 0, yZ: 2 });
  assert.deepEqual(enumMembers(enums, "dt_b", asIs), { P: 1 });
  assert.throws(() => enumMembers(enums, "dt_c", asIs), /cannot read "DT_Q = 1 << 2"/);
  assert.throws(() => enumMembers(enums, "dt_none", asIs), /no header declares enum dt_none/);
  assert.equal(camel()("GELU_TANH"), "geluTanh");
  assert.equal(camel("REDUCTION_")("REDUCTION_MEAN"), "mean");
});
