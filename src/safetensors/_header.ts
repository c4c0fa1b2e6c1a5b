/**
 * The safetensors header: laying tensors out and encoding the JSON for `save`, and checking every
 * field of an untrusted header for `load`.
 *
 * [Note: safetensors layout]
 * A file is an 8-byte little-endian u64 `N`, `N` bytes of UTF-8 JSON, then the data region. The
 * JSON maps each tensor name to `{"dtype", "shape", "data_offsets": [begin, end]}` (byte offsets
 * into the data region) and may hold `"__metadata__"`, a map of strings to strings. We write it as
 * the reference implementation (huggingface/safetensors, `prepare()` in tensor.rs) does, so that a
 * file saved here is byte-identical to one saved by `safetensors.torch.save_file`:
 * - tensors ordered by dtype, larger alignment first (F32 before I32), then by name in UTF-8 byte
 *   order, and packed without gaps;
 * - compact JSON with `__metadata__` first (omitted when there is none), then the tensors in data
 *   order; metadata keys sorted, so that the bytes do not depend on insertion order;
 * - the JSON padded with spaces to a multiple of 8 bytes, which keeps the data 8-byte aligned.
 * Like the reference loader we accept any tensor order, but the offsets must cover the data region
 * exactly: no overlaps, holes or trailing bytes.
 * @module
 */

import { z } from "zod";
import { type DType, itemSize } from "../tensor/dtype.ts";
import { formatShape, shapeSize } from "../tensor/layout.ts";
import { printable } from "../io/printable.ts";
import { CheckpointError } from "./errors.ts";

/** The reference implementation's limit on `N`. */
export const MAX_HEADER_BYTES = 100_000_000;

const METADATA_KEY = "__metadata__";

const FILE_DTYPES: ReadonlyMap<DType, string> = new Map([
  ["f32", "F32"],
  ["i32", "I32"],
  ["u16", "U16"],
  ["bf16", "BF16"],
  ["f16", "F16"],
]);
const DTRAIN_DTYPES: ReadonlyMap<string, DType> = new Map([
  ["F32", "f32"],
  ["I32", "i32"],
  ["U16", "u16"],
  ["BF16", "bf16"],
  ["F16", "f16"],
]);

/** The reference's data order: its Dtype enum descending (F32, I32, BF16, F16, then U16). */
// bool is refused before layout (safetensors.ts): the rank only completes the table.
const DTYPE_RANK: Readonly<Record<DType, number>> = {
  f32: 0,
  i32: 1,
  bf16: 2,
  f16: 3,
  u16: 4,
  bool: 5,
};

/** One tensor's place in the data region. */
export interface TensorEntry {
  /** The tensor's name (PyTorch's state_dict key). */
  name: string;
  /** The element type. */
  dtype: DType;
  /** The dimensions. */
  shape: readonly number[];
  /** First byte in the data region. */
  begin: number;
  /** One past the last byte in the data region. */
  end: number;
}

/** A decoded and checked header. */
export interface Header {
  /** The tensors, ordered by their offsets. */
  entries: TensorEntry[];
  /** `__metadata__`, or `{}` when absent. */
  metadata: Record<string, string>;
}

/**
 * Orders strings as their UTF-8 bytes (the reference's order), i.e. by code point; JavaScript's
 * default order compares UTF-16 units, which differs above U+FFFF.
 */
function compareUtf8(a: string, b: string): number {
  for (let i = 0; i < a.length && i < b.length;) {
    const x = a.codePointAt(i)!, y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    i += x > 0xffff ? 2 : 1;
  }
  return a.length - b.length;
}

/**
 * Orders tensors as the reference does and assigns their offsets (see the note above).
 *
 * @param tensors Name, dtype and shape of each tensor, in any order.
 * @returns The entries in data order.
 */
export function layout(
  tensors: readonly { name: string; dtype: DType; shape: readonly number[] }[],
): TensorEntry[] {
  const ordered = [...tensors].sort((a, b) =>
    DTYPE_RANK[a.dtype] - DTYPE_RANK[b.dtype] || compareUtf8(a.name, b.name)
  );
  let offset = 0;
  return ordered.map(({ name, dtype, shape }) => {
    const begin = offset;
    offset += shapeSize(shape) * itemSize(dtype);
    return { name, dtype, shape, begin, end: offset };
  });
}

/** `{"k":v,...}` from keys and already-encoded values; keeps `__proto__` an ordinary key. */
function jsonObject(pairs: readonly (readonly [string, string])[]): string {
  return `{${pairs.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(",")}}`;
}

/**
 * The header bytes, padded with spaces to a multiple of 8 (see the note above).
 *
 * @param entries The tensors in data order, from `layout`.
 * @param metadata The `__metadata__` map; omitted from the file when undefined.
 * @returns The UTF-8 JSON, without the 8-byte length before it.
 */
export function encodeHeader(
  entries: readonly TensorEntry[],
  metadata: Record<string, string> | undefined,
): Uint8Array {
  const pairs: [string, string][] = [];
  if (metadata !== undefined) {
    const keys = Object.keys(metadata).sort(compareUtf8);
    pairs.push([METADATA_KEY, jsonObject(keys.map((key) => [key, JSON.stringify(metadata[key])]))]);
  }
  for (const e of entries) {
    const info = {
      dtype: FILE_DTYPES.get(e.dtype),
      shape: e.shape,
      data_offsets: [e.begin, e.end],
    };
    pairs.push([e.name, JSON.stringify(info)]);
  }
  const json = new TextEncoder().encode(jsonObject(pairs));
  const padded = new Uint8Array(Math.ceil(json.length / 8) * 8).fill(0x20);
  padded.set(json);
  return padded;
}

/** A short rendering of an untrusted JSON value for error messages. */
function show(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

const count = z.number().refine(isCount);

/** The schema of one tensor's entry (fields beyond these are ignored, as the reference does). */
const EntrySchema = z.looseObject({
  dtype: z.string(),
  shape: z.array(count),
  data_offsets: z.tuple([count, count]),
});

/** The schema of `__metadata__`: strings to strings. */
const MetadataSchema = z.record(z.string(), z.string());

function formatOffsets(e: { begin: number; end: number }): string {
  return `[${e.begin}, ${e.end}]`;
}

/**
 * Decodes an untrusted header and checks every field against the size of the data region.
 *
 * @param path The file, for error messages.
 * @param bytes The `N` header bytes.
 * @param dataBytes The size of the data region: the file size less `8 + N`.
 * @returns The tensors ordered by offset, and the metadata.
 * @throws CheckpointError naming the file, the tensor or field, and the value seen.
 */
export function decodeHeader(path: string, bytes: Uint8Array, dataBytes: number): Header {
  const fail = (problem: string): never => {
    throw new CheckpointError(path, problem);
  };
  let text = "";
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    fail(`header (${bytes.length} bytes) is not valid UTF-8`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    // V8's message quotes the text around the error, which may hold any control bytes.
    fail(
      `header (${bytes.length} bytes) is not valid JSON: ${printable((error as Error).message)}`,
    );
  }
  if (!isObject(json)) return fail(`header is ${show(json)}, not a JSON object`);
  // JSON.parse keeps the last of two equal keys; a header that names a tensor twice is ambiguous.
  const duplicate = duplicateKey(text);
  if (duplicate !== null) fail(duplicate);

  let metadata: Record<string, string> = {};
  const rawMetadata = json[METADATA_KEY];
  if (rawMetadata !== undefined) {
    if (!isObject(rawMetadata)) fail(`${METADATA_KEY} is ${show(rawMetadata)}, not an object`);
    const parsed = MetadataSchema.safeParse(rawMetadata);
    if (!parsed.success) {
      const key = String(parsed.error.issues[0].path[0]);
      const value = (rawMetadata as Record<string, unknown>)[key];
      fail(`${METADATA_KEY} maps ${JSON.stringify(key)} to ${show(value)}, not to a string`);
    }
    // From the parsed JSON, not zod's copy, which drops a "__proto__" key.
    metadata = Object.fromEntries(Object.entries(rawMetadata as Record<string, string>));
  }

  const entries: TensorEntry[] = [];
  for (const [name, info] of Object.entries(json)) {
    if (name === METADATA_KEY) continue;
    const what = `tensor ${JSON.stringify(name)}`;
    if (!isObject(info)) return fail(`${what} is ${show(info)}, not an object`);
    const parsed = EntrySchema.safeParse(info);
    // The fields in the order a reader meets them, so that the first problem is the one named.
    const bad = new Set(parsed.error?.issues.map((issue) => issue.path[0]) ?? []);
    const { dtype: fileDtype, shape, data_offsets: offsets } = info;
    if (bad.has("dtype")) return fail(`${what} has dtype ${show(fileDtype)}`);
    const dtype = DTRAIN_DTYPES.get(fileDtype as string);
    if (dtype === undefined) {
      const hint = fileDtype === "I64" ? "; convert int64 tensors to int32 before saving" : "";
      return fail(
        `${what} has unsupported dtype ${
          show(fileDtype)
        } (dtrain reads F32, BF16, F16, I32 and U16${hint})`,
      );
    }
    if (bad.has("shape")) {
      return fail(`${what} has shape ${show(shape)}; dimensions must be non-negative integers`);
    }
    if (bad.has("data_offsets")) {
      return fail(`${what} has data_offsets ${show(offsets)}, not [begin, end] byte offsets`);
    }
    const checked = parsed.data!;
    const [begin, end] = checked.data_offsets;
    const entry = { name, dtype, shape: checked.shape, begin, end };
    if (entry.end < entry.begin) {
      fail(`${what} has data_offsets ${formatOffsets(entry)}, which end before they begin`);
    }
    // Past 2^53 the product is inexact, but then it exceeds any real file anyway.
    const needed = shapeSize(entry.shape) * itemSize(dtype);
    if (entry.end - entry.begin !== needed) {
      fail(
        `${what} has data_offsets ${formatOffsets(entry)} but shape ${formatShape(entry.shape)} ` +
          `${fileDtype} needs ${needed} bytes`,
      );
    }
    if (entry.end > dataBytes) {
      fail(
        `${what} has data_offsets ${formatOffsets(entry)} but the data region after the header ` +
          `holds only ${dataBytes} bytes (truncated file?)`,
      );
    }
    entries.push(entry);
  }

  entries.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let covered = 0;
  entries.forEach((e, i) => {
    const previous = entries[i - 1];
    if (e.begin < covered) {
      fail(
        `tensor ${JSON.stringify(e.name)} at data_offsets ${formatOffsets(e)} overlaps tensor ` +
          `${JSON.stringify(previous.name)} at ${formatOffsets(previous)}`,
      );
    }
    if (e.begin > covered) {
      const before = previous === undefined
        ? "the start of the data region"
        : `tensor ${JSON.stringify(previous.name)} (ends at ${covered})`;
      fail(
        `${e.begin - covered} unused bytes between ${before} and tensor ` +
          `${JSON.stringify(e.name)} (begins at ${e.begin})`,
      );
    }
    covered = e.end;
  });
  if (covered !== dataBytes) {
    fail(
      `${dataBytes - covered} trailing bytes: the tensors cover ${covered} bytes of the ` +
        `${dataBytes}-byte data region`,
    );
  }
  return { entries, metadata };
}

/**
 * The first key that appears twice in one object of the (valid) JSON `text`, described with the
 * object it is in, or null when there is none.
 */
function duplicateKey(text: string): string | null {
  // One frame per open container: the keys seen (null for arrays) and the key that named it.
  const stack: { keys: Set<string> | null; name: string | null }[] = [];
  let lastKey: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "{" || c === "[") {
      stack.push({ keys: c === "{" ? new Set() : null, name: lastKey });
      lastKey = null;
    } else if (c === "}" || c === "]") {
      stack.pop();
    } else if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const top = stack.at(-1);
      let k = j + 1;
      while (/\s/.test(text[k] ?? "")) k++;
      if (top?.keys && text[k] === ":") {
        const key: string = JSON.parse(text.slice(i, j + 1));
        if (top.keys.has(key)) {
          const where = stack.length === 1
            ? "the header names it twice"
            : `it appears twice in the entry of ${JSON.stringify(top.name)}`;
          return `duplicate key ${JSON.stringify(key)}: ${where}`;
        }
        top.keys.add(key);
        lastKey = key;
      }
      i = j;
    }
  }
  return null;
}
