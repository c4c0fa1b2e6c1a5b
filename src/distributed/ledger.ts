/**
 * The flight recorder: every rank keeps its last N collectives and point-to-point operations
 * (group, sequence number, op, dtype, shape, bytes, when each was enqueued, started and finished,
 * and the line of the user's code that called it) in a ring, on by default (env
 * `DTRAIN_LEDGER=N`, default 2000; 0 turns it off). A diagnosis (ledger_analysis.ts) reads it
 * when a collective fails, on SIGUSR1 and from the files a job leaves behind.
 *
 * [Note: call sites at the cost of a capture]
 * Formatting a stack costs 70-100 µs, capturing one 2-4 µs when warm: V8 keeps the frames and
 * formats `.stack` only when it is read. So each entry holds the captured object, unformatted, and
 * its `file:line` is worked out only when a diagnosis or a dump asks. DDP and FSDP issue many
 * collectives per backward from inside dtrain; inside `callerScope` they share one capture of the
 * user's call (`ddp.backward(loss)`), so a step costs one capture, not one per bucket. That capture
 * is a step's first stack walk, and the first walk after the event loop or a forward pass costs
 * 30-50 µs whatever the number of frames (BENCHMARKS.md, "Why: the first stack walk"): under 1% of
 * a DDP step above about 5 ms. Sampling the site every k-th call would be cheaper but could name a
 * stale line once the caller changes, so every call is captured.
 * @module
 */

import { fileURLToPath } from "node:url";
import { relative } from "node:path";
import { nowUs } from "../profile/tracer.ts";

/** Where an operation was called: a captured stack, formatted on first read. */
export class CallSite {
  #holder: { stack?: string };
  #text: string | null = null;

  /** Captures the current stack, unformatted. */
  constructor() {
    const holder = {};
    const limit = Error.stackTraceLimit;
    // dtrain's own frames between a public call and this one number about 7 (a collective's), 3
    // under callerScope (DDP's and FSDP's backward, a pipeline step); each frame captured costs
    // (a deep stack of 48 frames takes three times as long as 16).
    Error.stackTraceLimit = 16;
    Error.captureStackTrace(holder, CallSite);
    Error.stackTraceLimit = limit;
    this.#holder = holder;
  }

  /** The first frame outside dtrain's src/ as `file:line` (relative to the working directory). */
  get text(): string {
    if (this.#text === null) {
      this.#text = userFrame(this.#holder.stack ?? "");
    }
    return this.#text;
  }

  /** The whole captured stack, formatted (for a dump of what a rank waits in). */
  get stack(): string {
    return this.#holder.stack ?? "";
  }
}

const SRC = new URL("../", import.meta.url).href;
/** dtrain's own layers, skipped when no frame lies outside src/ (the train job is dtrain's). */
const LIBRARY = ["distributed/", "parallel/", "profile/", "nn/", "tensor/", "optim/"].map((d) =>
  SRC + d
);

/** The user's frame of a formatted stack, as `file:line`, or "?" when there is none. */
export function userFrame(stack: string): string {
  const frames = [...stack.matchAll(/((?:file|https?):\/\/[^\s()]+):(\d+):\d+/g)];
  const pick = frames.find((m) => !m[1].startsWith(SRC)) ??
    frames.find((m) => !LIBRARY.some((l) => m[1].startsWith(l)));
  if (pick === undefined) return "?";
  return `${shortPath(pick[1])}:${pick[2]}`;
}

function shortPath(url: string): string {
  if (!url.startsWith("file://")) return url;
  const path = fileURLToPath(url);
  try {
    const rel = relative(Deno.cwd(), path);
    return rel.startsWith("..") ? path : rel;
  } catch {
    return path;
  }
}

/** One operation of the ledger. */
export interface LedgerEntry {
  /** The group's name ("world", "group1", ...). */
  group: string;
  /** Its sequence number in the group, from 1. */
  seq: number;
  /** The operation ("allReduce", "barrier", "send", ...). */
  op: string;
  /** Element type ("" for none). */
  dtype: string;
  /** Shape of its tensor (its element count when the tensor has no shape). */
  shape: number[];
  /** Bytes it moves. */
  bytes: number;
  /** The peer's global rank, for point-to-point operations. */
  peer?: number;
  /** When it was enqueued, started, finished (microseconds since the epoch; 0: not yet). */
  enqueuedUs: number;
  startedUs: number;
  finishedUs: number;
  /** Its failure, if it failed. */
  error?: string;
  /** Who called it. */
  site: CallSite;
}

/** An entry as JSON: its call site as `file:line`. */
export type EntryJson = Omit<LedgerEntry, "site"> & { site: string; stack?: string };

let envProblem: string | null = null;

/** The ring length from env DTRAIN_LEDGER (default 2000, 0 off), read without failing. */
function sizeFromEnv(): number {
  let v: string | undefined;
  try {
    v = Deno.env.get("DTRAIN_LEDGER");
  } catch {
    return DEFAULT_SIZE;
  }
  if (v === undefined || v === "") return DEFAULT_SIZE;
  const n = Number(v);
  if (Number.isInteger(n) && n >= 0) return n;
  // An import must not throw: initProcessGroup refuses it (ledgerEnvProblem).
  envProblem = `DTRAIN_LEDGER must be a whole number of operations (0: off), got '${v}'`;
  return DEFAULT_SIZE;
}

/** Why env DTRAIN_LEDGER cannot be used, or null. */
export function ledgerEnvProblem(): string | null {
  return envProblem;
}

const DEFAULT_SIZE = 2000;
let size = sizeFromEnv();
let ring: (LedgerEntry | undefined)[] = new Array(size);
let next = 0;
const seqs = new Map<string, number>();
let scope: CallSite | null = null;

/** Whether the ledger records (DTRAIN_LEDGER is not 0). */
export function ledgerOn(): boolean {
  return size > 0;
}

/**
 * Sets how many operations the ledger keeps (0 turns it off) and empties it. For benchmarks and
 * tests; a job sets DTRAIN_LEDGER.
 *
 * @param n The ring length.
 */
export function setLedgerSize(n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new Error(`setLedgerSize: bad size ${n}`);
  size = n;
  ring = new Array(n);
  next = 0;
}

/**
 * Runs `fn` with one capture of the caller's site standing for every operation it issues (DDP's
 * buckets during `ddp.backward(loss)`); see [Note: call sites at the cost of a capture]. A
 * returned promise keeps the scope until it settles.
 *
 * @param fn The work.
 * @returns What `fn` returns.
 */
export function callerScope<T>(fn: () => T): T {
  if (size === 0 || scope !== null) return fn();
  const mine = new CallSite();
  scope = mine;
  let out: T;
  try {
    out = fn();
  } catch (err) {
    scope = null;
    throw err;
  }
  if (out instanceof Promise) {
    return out.finally(() => {
      if (scope === mine) scope = null;
    }) as T;
  }
  scope = null;
  return out;
}

/**
 * Appends an operation to the ledger, enqueued now, and numbers it in its group.
 *
 * @param fields What it is.
 * @returns The entry, to mark started and finished; null when the ledger is off.
 */
export function ledgerAppend(
  fields: Pick<LedgerEntry, "group" | "op" | "dtype" | "shape" | "bytes" | "peer">,
): LedgerEntry | null {
  if (size === 0) return null;
  const seq = (seqs.get(fields.group) ?? 0) + 1;
  seqs.set(fields.group, seq);
  const entry: LedgerEntry = {
    ...fields,
    seq,
    enqueuedUs: nowUs(),
    startedUs: 0,
    finishedUs: 0,
    site: scope ?? new CallSite(),
  };
  ring[next] = entry;
  next = (next + 1) % size;
  return entry;
}

/**
 * The sequence number of the group's last operation (0: none yet).
 *
 * @param group The group's name.
 */
export function ledgerSeq(group: string): number {
  return seqs.get(group) ?? 0;
}

/** The entries held, oldest first. */
export function ledgerEntries(): LedgerEntry[] {
  const out: LedgerEntry[] = [];
  for (let i = 0; i < size; i++) {
    const e = ring[(next + i) % size];
    if (e !== undefined) out.push(e);
  }
  return out;
}

/**
 * An entry as JSON.
 *
 * @param e The entry.
 * @param withStack Whether to add the whole stack (for pending operations in a dump).
 */
export function entryJson(e: LedgerEntry, withStack = false): EntryJson {
  const { site, ...rest } = e;
  return { ...rest, site: site.text, ...(withStack ? { stack: site.stack } : {}) };
}

const members = new Map<string, number[]>();

/**
 * Notes a group's members (global ranks), for the diagnosis to know who should have called.
 *
 * @param name The group's name.
 * @param ranks Its members.
 */
export function ledgerGroup(name: string, ranks: readonly number[]): void {
  members.set(name, [...ranks]);
}

/** The members of each group noted, by name. */
export function ledgerGroups(): ReadonlyMap<string, number[]> {
  return members;
}

/** Forgets the sequence numbers (a new initProcessGroup numbers its groups afresh). */
export function ledgerReset(): void {
  seqs.clear();
  members.clear();
  ring = new Array(size);
  next = 0;
}
