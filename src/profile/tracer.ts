/**
 * A per-rank timeline in the Chrome trace format (what Perfetto and chrome://tracing open). It is
 * on when env `DTRAIN_PROFILE` names a file, or after {@linkcode startProfile}; hooks elsewhere
 * are one line each and cost one branch when it is off. Each rank's events go to track
 * ("process") `rank N`, with two rows: `main` (forward, backward, optimizer step, data loading,
 * waits) and `comm` (each collective, with its bytes, as its backend ran it). Times are
 * microseconds since the Unix epoch, so ranks on one host line up without any exchange. Under
 * the launcher each rank writes `PATH.rank<N>.json` at exit and the launcher merges them into
 * PATH (merge.ts); a process on its own writes PATH itself.
 * @module
 */

import { dirname } from "node:path";
import { writeTextFileAtomic } from "../io/private_files.ts";

/** One complete event ("X") of the Chrome trace format. */
export interface TraceEvent {
  /** What ran: "forward", "allReduce", ... */
  name: string;
  /** Its category: "compute", "comm", "data", "wait", "optim". */
  cat: string;
  /** "X" (complete) or "M" (metadata: names of tracks and rows). */
  ph: "X" | "M";
  /** Start, in microseconds. */
  ts: number;
  /** Duration, in microseconds. */
  dur?: number;
  /** Track: the rank. */
  pid: number;
  /** Row within the track: 0 main, 1 comm. */
  tid: number;
  /** Details shown on selection (bytes, bucket index). */
  args?: Record<string, unknown>;
}

/** The rows of a rank's track. */
export const ROWS = { main: 0, comm: 1 } as const;

interface Profile {
  path: string;
  rank: number;
  events: TraceEvent[];
}

let active: Profile | null = null;

/** Microseconds since the Unix epoch, with sub-millisecond precision. */
export function nowUs(): number {
  return (performance.timeOrigin + performance.now()) * 1000;
}

/** Whether a profile is being recorded. */
export function profiling(): boolean {
  return active !== null;
}

/**
 * Starts recording this process's timeline; it is written to `path` by {@linkcode stopProfile}
 * (or at exit). Under the launcher (env RANK set) the file is `path.rank<N>.json`, for the
 * launcher to merge.
 *
 * @param path Where the trace goes.
 * @param rank The track to record on (default env RANK, else 0).
 *
 * @example Record a span and read it back
 * ```ts
 * import assert from "node:assert/strict";
 * import { span, startProfile, stopProfile } from "./tracer.ts";
 * const path = await Deno.makeTempFile({ suffix: ".json" });
 * startProfile(path, 0);
 * span("forward", "compute", () => 1 + 1);
 * stopProfile();
 * const trace = JSON.parse(await Deno.readTextFile(path));
 * assert.ok(trace.traceEvents.some((e: { name: string }) => e.name === "forward"));
 * ```
 */
export function startProfile(path: string, rank?: number): void {
  if (path === "") throw new Error("startProfile: the trace path is empty");
  const problem = unwritableTrace(path);
  if (problem !== null) throw new Error(`startProfile: ${problem}`);
  const envRank = Deno.env.get("RANK");
  const r = rank ?? (envRank === undefined ? 0 : Number(envRank));
  active = { path: envRank === undefined ? path : `${path}.rank${r}.json`, rank: r, events: [] };
}

/**
 * Why no trace can be written to `path`, or null: its folder must exist and take a new file, so
 * that a missing folder, a read-only filesystem or a folder without write permission is found
 * before a run starts rather than when it ends.
 *
 * @param path The trace file (`--profile`, DTRAIN_PROFILE).
 * @returns The reason, naming the path, or null.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { unwritableTrace } from "./tracer.ts";
 * assert.equal(unwritableTrace(`${await Deno.makeTempDir()}/trace.json`), null);
 * assert.match(unwritableTrace("/no/such/folder/trace.json")!, /folder \/no\/such\/folder does not exist/);
 * ```
 */
export function unwritableTrace(path: string): string | null {
  const dir = dirname(path);
  try {
    if (Deno.statSync(path).isDirectory) return `cannot write the trace ${path}: it is a folder`;
  } catch {
    // Not there yet: it is written at the end.
  }
  try {
    Deno.removeSync(Deno.makeTempFileSync({ dir, prefix: ".dtrain-trace-" }));
    return null;
  } catch (error) {
    const why = error instanceof Deno.errors.NotFound
      ? `its folder ${dir} does not exist`
      : `its folder ${dir} does not take new files (${(error as Error).message})`;
    return `cannot write the trace ${path}: ${why}`;
  }
}

/**
 * Drops this process's timeline unwritten (and the note at exit that DTRAIN_PROFILE could not be
 * written). The launcher calls it: its ranks record the job and it merges their traces into the
 * path, which its own (empty) timeline would overwrite at exit; so does a command that refuses
 * the path itself.
 */
export function discardProfile(): void {
  active = null;
  envProblem = null;
}

/**
 * Writes the recorded timeline and stops recording. Does nothing when not recording.
 * @returns The file written, or null.
 */
export function stopProfile(): string | null {
  const p = active;
  if (p === null) return null;
  active = null;
  const names: TraceEvent[] = [
    {
      name: "process_name",
      cat: "",
      ph: "M",
      ts: 0,
      pid: p.rank,
      tid: 0,
      args: { name: `rank ${p.rank}` },
    },
    {
      name: "process_sort_index",
      cat: "",
      ph: "M",
      ts: 0,
      pid: p.rank,
      tid: 0,
      args: { sort_index: p.rank },
    },
    ...Object.entries(ROWS).map(([name, tid]): TraceEvent => ({
      name: "thread_name",
      cat: "",
      ph: "M",
      ts: 0,
      pid: p.rank,
      tid,
      args: { name },
    })),
  ];
  // Replaced, never written through a link planted at the name (io/private_files.ts).
  writeTextFileAtomic(p.path, JSON.stringify({ traceEvents: [...names, ...p.events] }));
  return p.path;
}

/**
 * Records an event that already happened.
 *
 * @param name What ran.
 * @param cat Its category.
 * @param startUs Start (microseconds since the epoch, see {@linkcode nowUs}).
 * @param endUs End.
 * @param args Details.
 * @param row The row (default main).
 */
export function record(
  name: string,
  cat: string,
  startUs: number,
  endUs: number,
  args?: Record<string, unknown>,
  row: number = ROWS.main,
): void {
  active?.events.push({
    name,
    cat,
    ph: "X",
    ts: startUs,
    dur: Math.max(0, endUs - startUs),
    pid: active.rank,
    tid: row,
    ...(args ? { args } : {}),
  });
}

let nextTag: Record<string, unknown> | null = null;

/**
 * Details for the next collective issued on this thread (DDP says which bucket it is): the
 * process group takes them when it queues the call, so they cannot land on another collective.
 */
export function tagNext(args: Record<string, unknown>): void {
  if (active !== null) nextTag = args;
}

/** The details set by {@linkcode tagNext}, once. */
export function takeTag(): Record<string, unknown> | null {
  const tag = nextTag;
  nextTag = null;
  return tag;
}

/** Records a collective on the comm row, with its payload in bytes and any tag. */
export function recordCollective(
  what: string,
  bytes: number,
  timing: { startUs: number; endUs: number },
  tag: Record<string, unknown> | null = null,
): void {
  const name = tag?.bucket !== undefined ? `${what} bucket ${tag.bucket}` : what;
  record(name, "comm", timing.startUs, timing.endUs, { bytes, ...tag }, ROWS.comm);
}

/**
 * Runs `fn` and records it as `name` on the main row; a returned promise is timed until it
 * settles. When not profiling it only calls `fn`.
 *
 * @returns What `fn` returns.
 */
export function span<T>(name: string, cat: string, fn: () => T): T {
  if (active === null) return fn();
  const start = nowUs();
  const out = fn();
  if (out instanceof Promise) {
    return out.finally(() => record(name, cat, start, nowUs())) as T;
  }
  record(name, cat, start, nowUs());
  return out;
}

/** DTRAIN_PROFILE, read without failing where env access is not granted. */
function profileFromEnv(): string | undefined {
  try {
    return Deno.env.get("DTRAIN_PROFILE");
  } catch {
    return undefined;
  }
}

const fromEnv = profileFromEnv();
// An import must not throw. The launcher and the train job refuse such a path with exit 2 before
// any rank starts (and discard this); a script of its own runs unprofiled and is told at exit.
let envProblem = fromEnv ? unwritableTrace(fromEnv) : null;
if (fromEnv && envProblem === null) startProfile(fromEnv);
// Whatever started it, the profile is written when the process exits.
globalThis.addEventListener("unload", () => {
  if (envProblem !== null) console.error(`dtrain: DTRAIN_PROFILE: ${envProblem}; no trace written`);
  stopProfile();
});
