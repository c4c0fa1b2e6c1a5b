/**
 * Checks that every rank of a group made the same call (a mesh's shape, a pipeline's schedule)
 * before anything depends on it, and names on every rank which ranks differ, and in what: left
 * alone, such a difference surfaces far from its cause, as a timeout, a tag mismatch or a wrong
 * shape several calls later.
 * @module
 */

import { tensor, zeros } from "../tensor/creation.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { allGather } from "./collectives.ts";
import { DistError } from "./errors.ts";
import type { ProcessGroup } from "./process_group.ts";

/**
 * FNV-1a over the UTF-16 code units of `s`, as a signed 32-bit integer (an i32 every backend
 * gathers).
 *
 * @param s The text.
 * @returns Its hash.
 */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/**
 * What a rank says about its call: each field's value, as an error should show it, or null for
 * a field this rank cannot tell (a pipeline's middle stage has no batch), compared with no one.
 */
export type CallFields = Readonly<Record<string, string | null>>;

/** Options of {@linkcode agreeAcrossRanks}. */
export interface AgreeOptions {
  /** Where the exchanged i32 tensors go: a device `group` reaches (default "cpu"). */
  device?: string;
  /** What the user should do, ending the error (e.g. "every rank must ..."). */
  fix: string;
}

/** "rank 1", "ranks 0 and 2", "ranks 0, 2 and 3". */
function rankList(ranks: readonly number[]): string {
  if (ranks.length === 1) return `rank ${ranks[0]}`;
  return `ranks ${ranks.slice(0, -1).join(", ")} and ${ranks[ranks.length - 1]}`;
}

/** Gathers `words` (the same length on every rank) from every rank of `group`, in rank order. */
async function gather(group: ProcessGroup, words: Int32Array, device: string): Promise<Int32Array> {
  const mine: Tensor = tensor(words, [words.length], { dtype: "i32", device });
  const all: Tensor = zeros([group.size * words.length], { dtype: "i32", device });
  try {
    await allGather(all, mine, group).wait();
    return all.toArray() as Int32Array;
  } finally {
    mine.dispose();
    all.dispose();
  }
}

/**
 * Verifies that every rank of `group` describes its call with the same `fields`; every rank
 * must call it at the same point. When their descriptions are the same it costs one all-gather
 * of two integers (a hash and a length); when not, a second one of every rank's fields, so that
 * every rank throws the same error, naming each field that differs and which ranks have which
 * value (or returns, when the only differences are fields some ranks cannot tell).
 *
 * @param group The ranks that must agree.
 * @param what The call, starting the error ("initDeviceMesh", "ScheduleGPipe").
 * @param fields This rank's description of its call.
 * @param options See {@linkcode AgreeOptions}.
 * @throws DistError "mismatch": `what: the ranks disagree: microbatches: rank 1 has 4, ranks 0
 *   and 2 have 8; <fix>`; or the all-gather's own error (a timeout when a rank never calls).
 */
export async function agreeAcrossRanks(
  group: ProcessGroup,
  what: string,
  fields: CallFields,
  options: AgreeOptions,
): Promise<void> {
  if (group.size <= 1) return;
  const device = options.device ?? "cpu";
  const text = JSON.stringify(fields);
  const bytes = new TextEncoder().encode(text);
  const heads = await gather(group, Int32Array.of(hash32(text), bytes.length), device);
  const same = (r: number) => heads[2 * r] === heads[0] && heads[2 * r + 1] === heads[1];
  if (group.ranks.every((_, r) => same(r))) return;
  // Every rank saw the same heads, so every rank takes this second all-gather, padded to the
  // longest description.
  const longest = Math.max(...group.ranks.map((_, r) => heads[2 * r + 1]));
  const words = Math.ceil(longest / 4);
  const padded = new Uint8Array(words * 4);
  padded.set(bytes);
  const all = await gather(group, new Int32Array(padded.buffer), device);
  const decoder = new TextDecoder();
  const theirs = group.ranks.map((_, r) => {
    const raw = new Uint8Array(all.buffer, all.byteOffset + r * words * 4, heads[2 * r + 1]);
    return JSON.parse(decoder.decode(raw)) as Record<string, string | null>;
  });
  const differences: string[] = [];
  const names = [...new Set(theirs.flatMap((f) => Object.keys(f)))];
  for (const name of names) {
    const byValue = new Map<string, number[]>();
    theirs.forEach((f, r) => {
      const value = f[name];
      if (value !== null && value !== undefined) {
        byValue.set(value, [...byValue.get(value) ?? [], group.ranks[r]]);
      }
    });
    if (byValue.size < 2) continue;
    // The smaller camps first: usually the odd rank out.
    const camps = [...byValue].sort((a, b) => a[1].length - b[1].length || a[1][0] - b[1][0]);
    const said = camps.map(([value, ranks]) =>
      `${rankList(ranks)} ${ranks.length === 1 ? "has" : "have"} ${value}`
    );
    differences.push(`${name}: ${said.join(", ")}`);
  }
  if (differences.length === 0) return;
  throw new DistError(
    "mismatch",
    `${what}: the ranks disagree: ${differences.join("; ")}; ${options.fix}`,
  );
}
