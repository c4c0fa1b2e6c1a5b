/** Element types and their sizes, for the tensor and the ops alike. @module */

/**
 * Element types: 32-bit float, 32-bit signed integer, bool (1 byte, 0 or 1, like torch.bool),
 * u16 (2 bytes, like torch.uint16): storage for token ids, which views, copies, devices and
 * checkpoints take, and which every op that computes refuses until it is converted with
 * `.to("i32")`; and the 2-byte floats bf16 (torch.bfloat16) and f16 (torch.float16), which
 * round from f32 to nearest even with PyTorch's bits and compute through f32 (see [Note: half
 * dtypes]).
 */
export type DType = "f32" | "i32" | "bool" | "u16" | "bf16" | "f16";

const SIZES: Record<DType, number> = { f32: 4, i32: 4, bool: 1, u16: 2, bf16: 2, f16: 2 };

/** The 2-byte floats. */
export type HalfDType = "bf16" | "f16";

/** The floating-point dtypes: f32 and the 2-byte floats. */
export type FloatDType = "f32" | HalfDType;

/** Whether `dtype` is bf16 or f16. */
export function isHalf(dtype: DType): dtype is HalfDType {
  return dtype === "bf16" || dtype === "f16";
}

const F32 = new Float32Array(1), U32 = new Uint32Array(F32.buffer);

/**
 * The bf16 bits of `value`, rounded through f32 to nearest even with PyTorch's bits (every NaN
 * 0xFFFF): csrc/core/half_math.h's `dt_f32_to_bf16`, for numbers on the JavaScript side.
 */
export function bf16Bits(value: number): number {
  F32[0] = value;
  const u = U32[0];
  return (u & 0x7fffffff) > 0x7f800000 ? 0xffff : (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
}

/** The value of bf16 `bits` (exact: bf16 is f32's top half). */
export function bf16Value(bits: number): number {
  U32[0] = bits << 16;
  return F32[0];
}

/** Whether `dtype` is a floating-point dtype (f32, bf16, f16). */
export function isFloat(dtype: DType): dtype is FloatDType {
  return dtype === "f32" || isHalf(dtype);
}

/** Bytes per element of a dtype. */
export function itemSize(dtype: DType): number {
  return SIZES[dtype];
}

/** Whether a string names a dtype (`to()` takes a dtype or a device name). */
export function isDType(target: string): target is DType {
  return Object.hasOwn(SIZES, target);
}

/** The dtypes the integer and bool kernels and f32's compute in (the 2-byte floats compute through f32). */
export type ComputeDType = Exclude<DType, "u16" | HalfDType>;

/**
 * Throws a TypeError naming `op` for a u16 tensor, which is storage only (PyTorch computes on
 * uint16 in few ops; dtrain in none, so that no kernel reads its 2-byte elements as 4-byte ones).
 *
 * @param op The op, for the message.
 * @param dtypes The operands' dtypes.
 */
export function refuseStorageOnly(op: string, ...dtypes: DType[]): void {
  if (dtypes.includes("u16")) {
    throw new TypeError(`${op}: u16 tensors are storage only; convert with .to("i32")`);
  }
}

/**
 * Throws a clear TypeError for a dtype dtrain does not have, such as PyTorch's "i64" (torch.long):
 * for callers in plain JavaScript, or past a cast, where the compiler did not check.
 *
 * @param op The op, for the message.
 * @param dtype The dtype asked for.
 */
export function checkDType(op: string, dtype: string): asserts dtype is DType {
  if (isDType(dtype)) return;
  const short = Object.hasOwn(PYTORCH_NAMES, dtype) ? PYTORCH_NAMES[dtype] : undefined;
  const hint = isInt64Name(dtype)
    ? '; dtrain\'s integers are i32 (pass dtype "i32": BigInt64Array data converts when every value fits)'
    : short !== undefined
    ? `; dtrain calls PyTorch's ${dtype} "${short}"`
    : "";
  throw new TypeError(
    `${op}: unknown dtype "${dtype}" (dtrain has f32, bf16, f16, i32, bool, u16)${hint}`,
  );
}

/** PyTorch's names of dtrain's dtypes, for the hint of an unknown dtype. */
const PYTORCH_NAMES: Readonly<Record<string, DType>> = {
  bfloat16: "bf16",
  float16: "f16",
  half: "f16",
  float32: "f32",
  float: "f32",
  int32: "i32",
  int: "i32",
  uint16: "u16",
};

/** Whether `name` is PyTorch's 64-bit integer dtype, which `to()` refuses as a dtype, not a device. */
export function isInt64Name(name: string): boolean {
  return name === "i64" || name === "int64" || name === "long";
}

/** PyTorch's other dtypes, by dtrain's short names and PyTorch's: refused by `to()` as dtypes. */
const FOREIGN_DTYPES = new Set([
  "bfloat16",
  "float16",
  "half",
  "f64",
  "float64",
  "double",
  "i8",
  "int8",
  "u8",
  "uint8",
  "i16",
  "int16",
]);

/**
 * Whether `name` names a dtype, dtrain's or one it lacks (`"bf16"`, `"i64"`), so that `to()`
 * refuses it as a dtype ("unknown dtype") rather than looking for a device of that name.
 */
export function isDTypeName(name: string): boolean {
  return isDType(name) || isInt64Name(name) || FOREIGN_DTYPES.has(name);
}
