/**
 * Reading a job's ledger files back (the launcher after a failure or a dump request, and
 * `deno task debug LOG_DIR` afterwards): every `rank_<N>.ledger.json` of the folder is checked
 * before it is believed, and the diagnosis names each file it could not use and why, instead of
 * dropping it as if the rank had left none. A folder is read as it is found: a FIFO, a device or
 * a folder under a ledger's name is named, never opened (opening a FIFO would block).
 * @module
 */

import { join } from "node:path";
import { analyze, type GroupState, type RankSummary } from "./ledger_analysis.ts";

/** What a rank's ledger file holds. */
export interface LedgerFile {
  why: string;
  summary: RankSummary;
  entries: unknown[];
}

/** The ledger files of a folder, and what was wrong with those that could not be used. */
export interface LedgerDir {
  /** Each rank's file, or null where it left none (or none that could be used). */
  files: Map<number, LedgerFile | null>;
  /** One line per unusable file: its name and what is wrong with it. */
  problems: string[];
}

/** A ledger is a few MB at most; anything far larger is not one. */
const MAX_LEDGER_BYTES = 64 << 20;
const LEDGER_NAME = /^rank_(\d+)\.ledger\.json$/;

const isInt = (v: unknown): v is number => Number.isSafeInteger(v);
const isRank = (v: unknown): v is number => isInt(v) && v >= 0;
const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const STATES = new Set(["done", "pending", "failed"]);

/** What is wrong with one operation of a summary, or null. */
function opProblem(o: unknown): string | null {
  if (!isObj(o)) return "is not an object";
  for (const k of ["group", "op", "site"] as const) {
    if (typeof o[k] !== "string") return `has no string '${k}'`;
  }
  if (!isInt(o.seq)) return "has no integer 'seq'";
  if (!STATES.has(o.state as string)) return `has state ${JSON.stringify(o.state)}`;
  if (!isNum(o.enqueuedUs) || !isNum(o.finishedUs)) return "has no numeric times";
  if (o.error !== undefined && typeof o.error !== "string") return "has a non-string 'error'";
  return null;
}

/** What is wrong with one group of a summary, or null. */
function groupProblem(g: unknown): string | null {
  if (!isObj(g)) return "is not an object";
  if (!Array.isArray(g.ranks) || !g.ranks.every(isRank)) return "has no list of ranks";
  if (!isInt(g.reached)) return "has no integer 'reached'";
  if (!Array.isArray(g.recent)) return "has no list 'recent'";
  for (const [i, o] of g.recent.entries()) {
    const p = opProblem(o);
    if (p) return `operation ${i} ${p}`;
  }
  return null;
}

/**
 * What is wrong with a parsed ledger file of `rank`, or null when it can be used.
 *
 * @param body The parsed JSON.
 * @param rank The rank its name says.
 */
export function ledgerProblem(body: unknown, rank: number): string | null {
  if (!isObj(body)) return "is not a JSON object";
  if (typeof body.why !== "string") return "has no string 'why'";
  if (!Array.isArray(body.entries)) return "has no list 'entries'";
  const s = body.summary;
  if (!isObj(s)) return "has no object 'summary'";
  if (s.rank !== rank) return `says it is rank ${JSON.stringify(s.rank)}, its name rank ${rank}`;
  if (!isInt(s.pid) || typeof s.host !== "string" || !isNum(s.atUs)) {
    return "has no pid, host or time in its summary";
  }
  if (!isObj(s.groups)) return "has no object 'summary.groups'";
  for (const [name, g] of Object.entries(s.groups)) {
    const p = groupProblem(g);
    if (p) return `group '${name}' ${p}`;
  }
  return null;
}

/** Reads one candidate file: its body, or what is wrong with it. */
function readOne(path: string, rank: number): LedgerFile | string {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (error) {
    return `cannot be read (${(error as Error).message})`;
  }
  if (!info.isFile) return "is not a regular file";
  if (info.size > MAX_LEDGER_BYTES) return `is ${info.size} bytes, too large for a ledger`;
  let body: unknown;
  try {
    body = JSON.parse(Deno.readTextFileSync(path));
  } catch (error) {
    return `is not valid JSON (${(error as Error).message})`;
  }
  return ledgerProblem(body, rank) ?? body as LedgerFile;
}

/**
 * Reads the ledger files in `dir`.
 *
 * @param dir The log folder.
 * @param ranks The ranks to look for (default: every rank a file was found for, and every member
 *   of a group a usable file names, so that a rank killed before it wrote one is missed).
 * @returns Each rank's file (null where it left none or an unusable one) and the problems.
 */
export function readLedgerDir(dir: string, ranks?: number[]): LedgerDir {
  const found = new Map<number, LedgerFile>();
  const problems: string[] = [];
  const named = new Set<number>();
  for (const e of Deno.readDirSync(dir)) {
    const m = e.name.match(LEDGER_NAME);
    if (!m) continue;
    const rank = Number(m[1]);
    if (!isRank(rank)) {
      problems.push(`${e.name}: the rank in its name is not a valid rank`);
      continue;
    }
    const read = readOne(join(dir, e.name), rank);
    if (typeof read === "string") {
      problems.push(`${e.name}: ${read}`);
      named.add(rank);
    } else found.set(rank, read);
  }
  const members = new Set<number>();
  for (const f of found.values()) {
    for (const g of Object.values(f.summary.groups) as GroupState[]) {
      for (const r of g.ranks) members.add(r);
    }
  }
  // A file whose rank no group of the job holds is not this job's (or its name lies).
  if (members.size > 0) {
    for (const r of [...found.keys(), ...named]) {
      if (members.has(r)) continue;
      problems.push(
        `rank_${r}.ledger.json: rank ${r} is not in the job (its groups hold ranks ${
          [...members].sort((a, b) => a - b).join(", ")
        })`,
      );
      found.delete(r);
      named.delete(r);
    }
  }
  const all = ranks ?? [...new Set([...found.keys(), ...named, ...members])].sort((a, b) => a - b);
  return { files: new Map(all.map((r) => [r, found.get(r) ?? null])), problems };
}

/**
 * The diagnosis of the ledger files in `dir` (see `analyze`), followed by a line for each file
 * that could not be used.
 *
 * @param dir The log folder.
 * @param ranks The ranks to look for.
 * @returns Its lines, or null when `dir` holds no ledger file at all.
 */
export function diagnoseLedgerDir(dir: string, ranks?: number[]): string[] | null {
  const { files, problems } = readLedgerDir(dir, ranks);
  if (![...files.values()].some((f) => f !== null) && problems.length === 0) return null;
  const summaries = new Map([...files].map(([r, f]) => [r, f?.summary ?? null]));
  const silentWhy = problems.length > 0
    ? "left no usable ledger (killed, or its file is unusable: see below)"
    : "left no ledger (killed, or died before writing it)";
  const lines = [...files.values()].some((f) => f !== null)
    ? analyze(summaries, { silentWhy })
    : ["no ledger file could be used"];
  return [...lines, ...problems.map((p) => `unusable ledger file ${p}`)];
}
