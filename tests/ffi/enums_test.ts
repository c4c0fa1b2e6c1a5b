// The ABI's enums are numbered in csrc/core/dtrain.h (the unary ops in scalar_math.h); ffi/dtrain.ts numbers them again for the
// TypeScript side (the FFI cannot read a C enum). This test holds the two to the same names and
// numbers, so that an op added to one and not the other fails here, not as a wrong kernel.
import assert from "node:assert/strict";
import { BinaryOp, CompareOp, DTypeCode, Status, UnaryOp } from "../../ffi/dtrain.ts";

// The unary ops' enum sits in scalar_math.h beside their formulas; the rest in dtrain.h.
const header = ["dtrain.h", "scalar_math.h"]
  .map((file) => Deno.readTextFileSync(new URL(`../../csrc/core/${file}`, import.meta.url)))
  .join("\n");

/** The members of `enum name { ... }` in the header, as TypeScript spells them, with their values. */
function cEnum(name: string, spell: (member: string) => string): Record<string, number> {
  const body = new RegExp(`enum ${name}\\s*\\{([^}]*)\\}`).exec(header)?.[1];
  assert.ok(body !== undefined, `dtrain.h declares no enum ${name}`);
  const members: Record<string, number> = {};
  for (const item of body.split(",").map((s) => s.trim()).filter(Boolean)) {
    const m = /^DT_(\w+)\s*=\s*(\d+)$/.exec(item);
    assert.ok(m, `enum ${name}: cannot read "${item}" (each member is DT_NAME = number)`);
    members[spell(m[1])] = Number(m[2]);
  }
  return members;
}

/** GELU_TANH -> geluTanh; REDUCTION_MEAN with prefix REDUCTION_ -> mean. */
const camel = (prefix = "") => (member: string) =>
  member.slice(prefix.length).toLowerCase().replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());

Deno.test("ffi/dtrain.ts numbers each ABI enum as csrc/core/dtrain.h does", () => {
  assert.deepEqual({ ...Status }, cEnum("dt_status", (m) => m));
  assert.deepEqual({ ...BinaryOp }, cEnum("dt_binary_op", camel()));
  assert.deepEqual({ ...UnaryOp }, cEnum("dt_unary_op", camel()));
  assert.deepEqual({ ...CompareOp }, cEnum("dt_compare_op", camel()));
  assert.deepEqual({ ...DTypeCode }, cEnum("dt_dtype", camel()));
});

Deno.test("the enum reader fails on an enum it cannot read or cannot find", () => {
  assert.throws(() => cEnum("dt_no_such_enum", camel()), /declares no enum dt_no_such_enum/);
  assert.equal(camel()("GELU_TANH"), "geluTanh");
  assert.equal(camel("REDUCTION_")("REDUCTION_MEAN"), "mean");
});
