/**
 * Merges the per-rank traces of a job (`PATH.rank<N>.json`, written by tracer.ts under the
 * launcher) into PATH: one file with a track per rank, which Perfetto and chrome://tracing open.
 * @module
 */

import { basename, dirname, join } from "node:path";
import { writeTextFileAtomic } from "../io/private_files.ts";
import type { TraceEvent } from "./tracer.ts";

/**
 * Merges `path.rank*.json` into `path` and removes the parts. Does nothing when `path` is
 * empty or undefined or no part exists.
 *
 * @param path The trace file named by `--profile` or DTRAIN_PROFILE.
 * @returns The ranks merged, ascending (empty when there was nothing to merge).
 *
 * @example Two ranks' parts become one trace
 * ```ts
 * import assert from "node:assert/strict";
 * import { mergeRankTraces } from "./merge.ts";
 * const dir = await Deno.makeTempDir();
 * for (const rank of [0, 1]) {
 *   const event = { name: "forward", cat: "compute", ph: "X", ts: 1, dur: 2, pid: rank, tid: 0 };
 *   await Deno.writeTextFile(`${dir}/t.json.rank${rank}.json`, JSON.stringify({ traceEvents: [event] }));
 * }
 * assert.deepEqual(await mergeRankTraces(`${dir}/t.json`), [0, 1]);
 * const merged = JSON.parse(await Deno.readTextFile(`${dir}/t.json`));
 * assert.deepEqual(merged.traceEvents.map((e: { pid: number }) => e.pid), [0, 1]);
 * ```
 */
export async function mergeRankTraces(path: string | undefined): Promise<number[]> {
  if (!path) return [];
  const dir = dirname(path);
  const part = new RegExp(`^${RegExp.escape(basename(path))}\\.rank(\\d+)\\.json$`);
  const parts: { rank: number; file: string }[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const m = part.exec(entry.name);
    if (entry.isFile && m) parts.push({ rank: Number(m[1]), file: join(dir, entry.name) });
  }
  if (parts.length === 0) return [];
  parts.sort((a, b) => a.rank - b.rank);
  const events: TraceEvent[] = [];
  for (const { file } of parts) {
    const trace = JSON.parse(await Deno.readTextFile(file)) as { traceEvents: TraceEvent[] };
    events.push(...trace.traceEvents);
  }
  // Replaced, never written through a link planted at the name (io/private_files.ts).
  writeTextFileAtomic(path, JSON.stringify({ traceEvents: events, displayTimeUnit: "ms" }));
  for (const { file } of parts) await Deno.remove(file);
  return parts.map((p) => p.rank);
}
