/**
 * A tensor's text, as PyTorch's `repr` writes it (torch/_tensor_str.py with the default print
 * options: precision 4, threshold 1000, edgeitems 3, linewidth 80), with dtrain's names:
 * `dtype=i32` for `dtype=torch.int32` (`dtype=bf16` for `dtype=torch.bfloat16`, `dtype=f16` for
 * `dtype=torch.float16`), `gradFn=<...>` and `requiresGrad=True` for `grad_fn` and
 * `requires_grad`. bf16 and f16 values print as f32 ones do, as PyTorch formats them after
 * `.float()`: `tensor([1.0078, 3.1406], dtype=bf16)`. Numbers are rounded half-to-even from their exact value, as Python's `format`
 * does (JavaScript's `toFixed` rounds ties up).
 * @module
 */

import { isFloat } from "./dtype.ts";
import type { Tensor } from "./tensor.ts";
import { DEFAULT_DEVICE } from "./device/mod.ts";

const PRECISION = 4, THRESHOLD = 1000, EDGE = 3, LINEWIDTH = 80;
const PREFIX = "tensor(";

/** |v| = mantissa * 2^exponent, exactly. */
function decompose(v: number): [bigint, number] {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(v));
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  return biased === 0 ? [fraction, -1074] : [fraction | (1n << 52n), biased - 1075];
}

/** round(|v| * 10^scale), ties to even, exactly. */
function scaled(v: number, scale: number): bigint {
  const [mantissa, exponent] = decompose(v);
  let num = mantissa, den = 1n;
  if (exponent >= 0) num <<= BigInt(exponent);
  else den <<= BigInt(-exponent);
  if (scale >= 0) num *= 10n ** BigInt(scale);
  else den *= 10n ** BigInt(-scale);
  const q = num / den, twice = 2n * (num % den);
  return twice > den || (twice === den && q % 2n === 1n) ? q + 1n : q;
}

const sign = (v: number) => (v < 0 || Object.is(v, -0) ? "-" : "");

function nonFinite(v: number): string | null {
  if (Number.isNaN(v)) return "nan";
  return Number.isFinite(v) ? null : v > 0 ? "inf" : "-inf";
}

/** Python's `f"{v:.{digits}f}"`. */
export function formatFixed(v: number, digits: number): string {
  const special = nonFinite(v);
  if (special !== null) return special;
  const s = scaled(v, digits).toString().padStart(digits + 1, "0");
  return sign(v) + (digits === 0 ? s : `${s.slice(0, -digits)}.${s.slice(-digits)}`);
}

/** Python's `f"{v:.{digits}e}"`. */
export function formatExponent(v: number, digits: number): string {
  const special = nonFinite(v);
  if (special !== null) return special;
  let e = v === 0 ? 0 : Math.floor(Math.log10(Math.abs(v)));
  let n = scaled(v, digits - e);
  // log10 can be off by one near powers of ten, and rounding can carry into a new digit.
  if (v !== 0 && n < 10n ** BigInt(digits)) n = scaled(v, digits - --e);
  if (n >= 10n ** BigInt(digits + 1)) n = scaled(v, digits - ++e);
  const d = n === 0n ? "0".repeat(digits + 1) : n.toString();
  const mantissa = digits === 0 ? d : `${d[0]}.${d.slice(1)}`;
  return `${sign(v)}${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
}

/** PyTorch's `_Formatter`: one width and one style for every element shown. */
class Formatter {
  #float: boolean;
  #bool: boolean;
  #intMode = true;
  #sci = false;
  width = 1;

  constructor(values: number[], dtype: Tensor["dtype"]) {
    this.#float = isFloat(dtype);
    this.#bool = dtype === "bool";
    if (!this.#float) {
      for (const v of values) this.width = Math.max(this.width, this.#plain(v).length);
      return;
    }
    const finite = values.filter((v) => Number.isFinite(v) && v !== 0);
    if (finite.length === 0) return;
    const abs = finite.map(Math.abs);
    const min = Math.min(...abs), max = Math.max(...abs);
    this.#intMode = finite.every((v) => v === Math.ceil(v));
    this.#sci = max / min > 1000 || max > 1e8 || (!this.#intMode && min < 1e-4);
    for (const v of finite) {
      const text = this.#sci
        ? formatExponent(v, PRECISION)
        : this.#intMode
        ? `${formatFixed(v, 0)}.`
        : formatFixed(v, PRECISION);
      this.width = Math.max(this.width, text.length);
    }
  }

  #plain(v: number): string {
    return this.#bool ? (v ? "True" : "False") : String(v);
  }

  format(v: number): string {
    let text: string;
    if (!this.#float) text = this.#plain(v);
    else if (this.#sci) text = formatExponent(v, PRECISION);
    else if (this.#intMode) text = formatFixed(v, 0) + (Number.isFinite(v) ? "." : "");
    else text = formatFixed(v, PRECISION);
    return text.padStart(this.width, " ");
  }
}

/** The positions shown along a dimension of `size`: all, or the first and last EDGE. */
function shown(size: number, summarize: boolean): (number | null)[] {
  const all = Array.from({ length: size }, (_, i) => i);
  if (!summarize || size <= 2 * EDGE) return all;
  return [...all.slice(0, EDGE), null, ...all.slice(size - EDGE)];
}

/** The flat offsets of the elements shown (PyTorch's `get_summarized_data`). */
function shownOffsets(shape: readonly number[], summarize: boolean): number[] {
  const out: number[] = [];
  const walk = (dim: number, base: number, step: number) => {
    if (dim === shape.length) return void out.push(base);
    const inner = step / shape[dim];
    for (const i of shown(shape[dim], summarize)) {
      if (i !== null) walk(dim + 1, base + i * inner, inner);
    }
  };
  walk(0, 0, shape.reduce((a, b) => a * b, 1));
  return out;
}

/** PyTorch's `_tensor_str_with_formatter`. */
function body(
  values: ArrayLike<number>,
  shape: readonly number[],
  base: number,
  indent: number,
  summarize: boolean,
  f: Formatter,
): string {
  const dims = shape.length;
  if (dims === 0) return f.format(values[base]);
  const inner = shape.slice(1).reduce((a, b) => a * b, 1);
  if (dims === 1) {
    const perLine = Math.max(1, Math.floor((LINEWIDTH - indent) / (f.width + 2)));
    const data = shown(shape[0], summarize).map((
      i,
    ) => (i === null ? " ..." : f.format(values[base + i])));
    const lines: string[] = [];
    for (let i = 0; i < data.length; i += perLine) {
      lines.push(data.slice(i, i + perLine).join(", "));
    }
    return `[${lines.join(",\n" + " ".repeat(indent + 1))}]`;
  }
  const slices = shown(shape[0], summarize).map((i) =>
    i === null ? "..." : body(values, shape.slice(1), base + i * inner, indent + 1, summarize, f)
  );
  return `[${slices.join("," + "\n".repeat(dims - 1) + " ".repeat(indent + 1))}]`;
}

/** PyTorch's `_add_suffixes`: each suffix on the line, or on a new one past the line width. */
function addSuffixes(text: string, suffixes: string[]): string {
  let out = text;
  let lastLine = text.length - text.lastIndexOf("\n") + 1;
  for (const suffix of suffixes) {
    if (lastLine + suffix.length + 2 > LINEWIDTH) {
      out += ",\n" + " ".repeat(PREFIX.length) + suffix;
      lastLine = PREFIX.length + suffix.length;
    } else {
      out += ", " + suffix;
      lastLine += suffix.length + 2;
    }
  }
  return out + ")";
}

/**
 * `String(t)` and `console.log(t)`: PyTorch's repr with dtrain's names.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * assert.equal(String(tensor([[0.1, 0.2], [3, 4]])), "tensor([[0.1000, 0.2000],\n        [3.0000, 4.0000]])");
 * assert.equal(String(tensor([1, 2], [2], { dtype: "i32" })), "tensor([1, 2], dtype=i32)");
 * assert.equal(String(tensor([1.0078, 3.1406], [2], { dtype: "bf16" })), "tensor([1.0078, 3.1406], dtype=bf16)");
 * ```
 */
export function repr(t: Tensor): string {
  if (t.disposed) return `tensor(<disposed>, shape=[${t.shape.join(", ")}], dtype=${t.dtype})`;
  const suffixes: string[] = [];
  if (t.device !== DEFAULT_DEVICE) suffixes.push(`device='${t.device}'`);
  let text: string;
  if (t.numel() === 0) {
    if (t.ndim !== 1) suffixes.push(`size=(${t.shape.join(", ")})`);
    if (t.dtype !== "f32") suffixes.push(`dtype=${t.dtype}`);
    text = "[]";
  } else {
    // PyTorch leaves out its default float dtype, int64 and bool; dtrain has no int64.
    if (t.dtype !== "f32" && t.dtype !== "bool") suffixes.push(`dtype=${t.dtype}`);
    const values = t.toArray();
    const summarize = t.numel() > THRESHOLD;
    const f = new Formatter(shownOffsets(t.shape, summarize).map((i) => values[i]), t.dtype);
    text = body(values, t.shape, 0, PREFIX.length, summarize, f);
  }
  if (t.gradFn !== null) suffixes.push(`gradFn=<${t.gradFn.name}>`);
  else if (t.requiresGrad) suffixes.push("requiresGrad=True");
  return addSuffixes(PREFIX + text, suffixes);
}
