/** Element types and their sizes, for the tensor and the ops alike. @module */

/** Element types: 32-bit float, 32-bit signed integer, and bool (1 byte, 0 or 1, like torch.bool). */
export type DType = "f32" | "i32" | "bool";

/** Bytes per element of a dtype. */
export function itemSize(dtype: DType): number {
  return dtype === "bool" ? 1 : 4;
}

/** Whether a string names a dtype (`to()` takes a dtype or a device name). */
export function isDType(target: string): target is DType {
  return target === "f32" || target === "i32" || target === "bool";
}
