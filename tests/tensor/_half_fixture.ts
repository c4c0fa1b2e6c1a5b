// PyTorch's bf16 and f16 bits (tests/fixtures/gen_half.py: half.json, half_tables.bin.gz), and
// the checks that a device converts and reads them bit for bit, shared by the cpu test
// (tests/tensor/half_test.ts) and the emu / cuda one (tests/tensor/half_cuda_test.ts).

import assert from "node:assert/strict";
import { type Device, type Tensor, tensor } from "../../mod.ts";

const FIXTURES = new URL("../fixtures/", import.meta.url);

/** f32 -> bf16 and f16 bits of a list of f32 bit patterns. */
export interface Conversions {
  f32: number[];
  bf16: number[];
  f16: number[];
}

/** One tensor of a fixture file: its dtype, shape and bits (u32 for f32, u16 for the halves). */
export interface FileTensor {
  dtype: "f32" | "bf16" | "f16";
  shape: number[];
  bits: number[];
}

/** half.json. */
export interface HalfFixture {
  torch: string;
  special: {
    name: string;
    f32: number;
    bf16: number;
    f16: number;
    tensorBf16: number;
    tensorF16: number;
  }[];
  random: { patterns: Conversions; values: Conversions };
  reprs: { dtype: "bf16" | "f16"; shape: number[]; f32: number[]; repr: string }[];
  files: Record<string, { sha256: string; tensors: Record<string, FileTensor> }>;
  dtrainFile: { file: string; tensors: Record<string, FileTensor> };
}

/** half.json, parsed. */
export const fixture: HalfFixture = JSON.parse(
  Deno.readTextFileSync(new URL("half.json", FIXTURES)),
);

/** The sections of half_tables.bin.gz (see gen_half.py's docstring). */
export interface Tables {
  bf16ToF32: Uint32Array;
  f16ToF32: Uint32Array;
  bf16ToF16: Uint16Array;
  f16ToBf16: Uint16Array;
  bf16Ties: Uint16Array;
  f16Ties: Uint16Array;
}

/** The elements of `size` bytes stored as byte planes in `bytes` (gen_half.py's `planes`). */
function unplane(bytes: Uint8Array, size: 2 | 4): Uint16Array | Uint32Array {
  const n = bytes.length / size;
  const out = new Uint8Array(bytes.length);
  for (let b = 0; b < size; b++) {
    for (let i = 0; i < n; i++) out[i * size + b] = bytes[b * n + i];
  }
  return size === 2 ? new Uint16Array(out.buffer) : new Uint32Array(out.buffer);
}

async function loadTables(): Promise<Tables> {
  const gz = Deno.readFileSync(new URL("half_tables.bin.gz", FIXTURES));
  const stream = new Blob([gz]).stream().pipeThrough(new DecompressionStream("gzip"));
  const raw = new Uint8Array(await new Response(stream).arrayBuffer());
  const sizes: [keyof Tables, 2 | 4, number][] = [
    ["bf16ToF32", 4, 65536],
    ["f16ToF32", 4, 65536],
    ["bf16ToF16", 2, 65536],
    ["f16ToBf16", 2, 65536],
    ["bf16Ties", 2, 6 * 0x7f7f],
    ["f16Ties", 2, 6 * 0x7bff],
  ];
  const out: Partial<Record<keyof Tables, Uint16Array | Uint32Array>> = {};
  let at = 0;
  for (const [name, size, n] of sizes) {
    out[name] = unplane(raw.subarray(at, at + size * n), size);
    at += size * n;
  }
  assert.equal(at, raw.length, "half_tables.bin.gz has the sections gen_half.py writes");
  return out as unknown as Tables;
}

/** half_tables.bin.gz, decoded. */
export const tables: Tables = await loadTables();

/** The f32 bits of the bf16 ties: per sign, per h below 0x7F7F, (h << 16) + 0x8000 + d. */
export function bf16TieInputs(): Uint32Array {
  const out: number[] = [];
  for (const sign of [0, 0x80000000]) {
    for (let h = 0; h < 0x7f7f; h++) {
      for (const d of [-1, 0, 1]) out.push((sign | ((h << 16) + 0x8000 + d)) >>> 0);
    }
  }
  return Uint32Array.from(out);
}

/** The f32 bits of the f16 ties: per sign, per h below 0x7BFF, the midpoint of h and h + 1, + d. */
export function f16TieInputs(): Uint32Array {
  const values = new Float32Array(tables.f16ToF32.buffer);
  const mid = new Float32Array(1), midBits = new Uint32Array(mid.buffer);
  const out: number[] = [];
  for (const sign of [0, 0x80000000]) {
    for (let h = 0; h < 0x7bff; h++) {
      mid[0] = (values[h] + values[h + 1]) / 2; // exact: one bit more than f16 holds
      for (const d of [-1, 0, 1]) out.push((sign | (midBits[0] + d)) >>> 0);
    }
  }
  return Uint32Array.from(out);
}

/** Asserts equal bits, naming the first difference with its input. */
export function assertBits(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  what: string,
  inputs?: ArrayLike<number>,
): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  const hex = (v: number) => `0x${(v >>> 0).toString(16)}`;
  for (let i = 0; i < expected.length; i++) {
    if (actual[i] !== expected[i]) {
      const from = inputs === undefined ? "" : ` (from ${hex(inputs[i])})`;
      assert.fail(
        `${what}: element ${i}${from} is ${hex(actual[i])}, PyTorch's is ${hex(expected[i])}`,
      );
    }
  }
}

/** The f32 tensor of bit patterns `bits` on `device`. */
export function f32Of(bits: ArrayLike<number>, device: Device) {
  return tensor(new Float32Array(Uint32Array.from(bits).buffer), [bits.length], { device });
}

/** Raw bits of a 2-byte tensor (u16 view). */
export function bits16(t: Tensor): Uint16Array {
  return t.view("u16").toArray() as Uint16Array;
}

/** Raw bits of an f32 tensor. */
export function bits32(t: Tensor): Uint32Array {
  return new Uint32Array((t.toArray() as Float32Array).buffer);
}

/**
 * Checks every conversion of the fixture on `device`: f32 to bf16 and f16 (special values,
 * random patterns and values, ties) by `to()` and by `tensor(..., { dtype })`, the 2-byte floats
 * to f32 and to each other for all 65536 patterns, and `toArray` reading them.
 */
export function checkConversions(device: Device): void {
  for (const dtype of ["bf16", "f16"] as const) {
    const cases: [string, Conversions][] = [
      ["special", {
        f32: fixture.special.map((c) => c.f32),
        bf16: fixture.special.map((c) => c.bf16),
        f16: fixture.special.map((c) => c.f16),
      }],
      ["random patterns", fixture.random.patterns],
      ["random values", fixture.random.values],
    ];
    const ties = dtype === "bf16" ? bf16TieInputs() : f16TieInputs();
    const tieBits = dtype === "bf16" ? tables.bf16Ties : tables.f16Ties;
    cases.push(["ties", { f32: [...ties], bf16: [...tieBits], f16: [...tieBits] }]);
    for (const [name, c] of cases) {
      const x = f32Of(c.f32, device);
      assertBits(bits16(x.to(dtype)), c[dtype], `${name} to ${dtype} on ${device}`, c.f32);
      const made = tensor(x.toArray() as Float32Array, [c.f32.length], { dtype, device });
      assertBits(bits16(made), c[dtype], `tensor(${name}, ${dtype}) on ${device}`, c.f32);
    }
  }
  const every = tensor(Uint16Array.from({ length: 65536 }, (_, i) => i), [65536], { device });
  const bf = every.view("bf16"), hf = every.view("f16");
  assertBits(bits32(bf.to("f32")), tables.bf16ToF32, `bf16 to f32 on ${device}`);
  assertBits(bits32(hf.to("f32")), tables.f16ToF32, `f16 to f32 on ${device}`);
  // toArray widens on the device with the same kernel: the same bits, NaN payloads included.
  assertBits(new Uint32Array((bf.toArray() as Float32Array).buffer), tables.bf16ToF32, "bf16 read");
  assertBits(new Uint32Array((hf.toArray() as Float32Array).buffer), tables.f16ToF32, "f16 read");
  assertBits(bits16(bf.to("f16")), tables.bf16ToF16, `bf16 to f16 on ${device}`);
  // PyTorch converts f16 to bf16 directly, writing its scalar NaN 0x7FC0; dtrain goes through f32,
  // whose NaN is 0xFFFF, as every f32 NaN converts (the other 63488 patterns are the same bits).
  const isNaN16 = (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
  const throughF32 = tables.f16ToBf16.map((b, h) =>
    isNaN16(h) ? (assert.equal(b, 0x7fc0), 0xffff) : b
  );
  assertBits(bits16(hf.to("bf16")), throughF32, `f16 to bf16 on ${device}`);
}
