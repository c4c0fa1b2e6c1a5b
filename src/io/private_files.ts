/**
 * Writing the job's own files (logs, metrics, reports, ledgers, snapshots, traces) so that another
 * local user cannot redirect them: never through a link, only in folders no one else controls,
 * and atomically where a file is replaced.
 *
 * [Note: no writes through planted links]
 * A job often runs as root with its files in a shared place (a snapshot in /tmp, and its `logs/`
 * beside it). A stranger who gets there first can make `logs/rank_0.log` a symbolic link to a file
 * of root's, and a job that opens the name appends to that file; one that writes `metrics.jsonl`
 * replaces it. Deno's open has no O_NOFOLLOW, so, as torchrun writes into a fresh `mkdtemp`:
 * - a folder the job writes in (`ownFolder`) must belong to this user (or root, for a shared one),
 *   be writable by no one else unless its sticky bit keeps them from renaming or removing what is
 *   ours (as /tmp), and no other user may rename a folder above it; else it is refused, naming its
 *   owner and mode. The build cache (ffi/build_cache.ts) takes the same rules, minus the sharing;
 * - a file that is replaced is written to a fresh name created with O_EXCL (`createNew`, which
 *   never follows a link) and renamed over the old one (which replaces a link, never its target);
 * - a file that is appended to is created with O_EXCL, or is a plain file of this user's with one
 *   name (`openAppend`), checked before it is opened and again, by device and inode, after. In a
 *   folder that passed `ownFolder` no other user can swap that file in between: a private folder
 *   is closed to them, and the sticky bit keeps them from replacing a file that is ours.
 * @module
 */

import { basename, dirname } from "node:path";
import { notRegularFile } from "./regular_file.ts";
import { writeAll } from "./write_all.ts";

/** A folder or file another user could use to redirect the job's writes; the message names it. */
export class UnsafePathError extends Error {
  /**
   * @param path The folder or file refused.
   * @param message What is wrong, naming the path, its owner and mode, and what to do.
   */
  constructor(readonly path: string, message: string) {
    super(message);
    this.name = "UnsafePathError";
  }
}

/** What a folder is to the job, for `ownFolder`. */
export interface FolderRules {
  /** What it is, for messages: "log folder", "run folder". */
  what: string;
  /** What to do instead, ending a refusal: "give --log-dir a folder of your own". */
  fix: string;
  /**
   * Whether a folder others may write to is accepted when its sticky bit protects what is ours,
   * and one that root owns (as /tmp): the files in it are then written as this module writes
   * them. False for the build cache, whose names others can compute.
   */
  shared?: boolean;
  /** The mode it is created with when missing (0755 by default). */
  mode?: number;
}

/**
 * Creates the folder `path` unless it exists, then checks that no other user controls it (see
 * [Note: no writes through planted links]).
 *
 * @param path The folder.
 * @param rules What it is and what it may be.
 * @throws UnsafePathError naming the path (or the folder above it), its owner and mode.
 *
 * @example A folder of one's own passes; one others may write to does not
 * ```ts
 * import { throws } from "node:assert/strict";
 * import { ownFolder } from "./private_files.ts";
 * const dir = Deno.makeTempDirSync();
 * const rules = { what: "run folder", fix: "use another" };
 * ownFolder(`${dir}/run`, rules);
 * Deno.chmodSync(`${dir}/run`, 0o777);
 * throws(() => ownFolder(`${dir}/run`, rules), /refusing the run folder .*\/run: others can write/);
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export function ownFolder(path: string, rules: FolderRules): void {
  const me = Deno.uid();
  const shared = rules.shared ?? false;
  const trusted = (uid: number | null) => uid === me || (shared && uid === 0);
  const refuse = (problem: string, fix = rules.fix) =>
    new UnsafePathError(path, `refusing the ${rules.what} ${path}: ${problem}; ${fix}`);
  // Nothing is made in a folder that another user could swap for one of their own.
  const there = nearestFolder(path);
  if (there !== path) checkFoldersFrom(Deno.realPathSync(there), me, refuse);
  Deno.mkdirSync(path, { recursive: true, mode: rules.mode ?? 0o755 });
  let info = Deno.lstatSync(path);
  // A symbolic link is as trustworthy as its owner, who may point it elsewhere at any time.
  if (info.isSymlink) {
    if (!trusted(info.uid)) {
      throw refuse(`it is a symbolic link owned by uid ${info.uid}, not by this user (uid ${me})`);
    }
    info = Deno.statSync(path);
  }
  if (!info.isDirectory) throw refuse(`it is not a folder (${modeAndOwner(info)})`);
  if (!trusted(info.uid)) {
    throw refuse(
      `it belongs to uid ${info.uid}, not to this user (uid ${me}); mode ${octal(info)}`,
    );
  }
  if (writableByOthers(info) && !(shared && sticky(info))) {
    const unless = shared ? ", without the sticky bit that would keep them off our files" : "";
    throw refuse(
      `others can write to it (${modeAndOwner(info)})${unless}`,
      `\`chmod go-w\` it, or ${rules.fix}`,
    );
  }
  checkFoldersFrom(dirname(Deno.realPathSync(path)), me, refuse);
}

/** `path`, or the nearest folder above it that exists. */
function nearestFolder(path: string): string {
  for (let dir = path;; dir = dirname(dir)) {
    try {
      Deno.statSync(dir);
      return dir;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound) || dir === dirname(dir)) throw error;
    }
  }
}

/**
 * Refuses when `dir` or a folder above it may be renamed by another user (root aside): one they
 * own, or one anyone may write to without the sticky bit (which, as on /tmp, lets only an entry's
 * owner rename it).
 */
function checkFoldersFrom(
  dir: string,
  me: number | null,
  refuse: (problem: string) => UnsafePathError,
): void {
  for (;; dir = dirname(dir)) {
    const above = Deno.statSync(dir);
    const why = above.uid !== me && above.uid !== 0
      ? `belongs to uid ${above.uid}, who could replace it (mode ${octal(above)})`
      : writableByOthers(above) && !sticky(above)
      ? `may be written by others (mode ${octal(above)}, no sticky bit), who could replace it`
      : null;
    if (why !== null) throw refuse(`the folder ${dir} above it ${why}`);
    if (dir === dirname(dir)) return;
  }
}

/**
 * The file at `path` as it is before the job writes it: null when there is none, else its
 * information once it is known to be a plain file of this user's with a single name.
 *
 * @param path The file.
 * @param what What it is, for the error ("log file").
 * @returns Its information (not following a link), or null when it does not exist.
 * @throws UnsafePathError naming the path, what it is, its owner and mode.
 */
export function checkOwnFile(path: string, what: string): Deno.FileInfo | null {
  let info;
  try {
    info = Deno.lstatSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  const me = Deno.uid();
  const problem = info.isSymlink
    ? `it is a symbolic link (${modeAndOwner(info)}), which may lead to anyone's file`
    : !info.isFile
    ? `it is ${notRegularFile(path) ?? "something else"}, not a regular file (${
      modeAndOwner(info)
    })`
    : info.uid !== me
    ? `it belongs to uid ${info.uid}, not to this user (uid ${me}); mode ${octal(info)}`
    : (info.nlink ?? 1) > 1
    ? `it has ${info.nlink} names (hard links), and another may be anyone's file (${
      modeAndOwner(info)
    })`
    : null;
  if (problem !== null) {
    throw new UnsafePathError(path, `refusing the ${what} ${path}: ${problem}; remove it`);
  }
  return info;
}

/**
 * Opens `path` to append to, never through a link: a new file is created with O_EXCL, an existing
 * one must pass `checkOwnFile` and still be the same file once open.
 *
 * @param path The file.
 * @param what What it is, for the error ("log file").
 * @returns The open file; the caller closes it.
 * @throws UnsafePathError naming the path, what it is, its owner and mode.
 *
 * @example
 * ```ts
 * import { equal, throws } from "node:assert/strict";
 * import { openAppend } from "./private_files.ts";
 * const dir = Deno.makeTempDirSync();
 * for (const line of ["a\n", "b\n"]) {
 *   using log = openAppend(`${dir}/rank_0.log`, "log file");
 *   log.writeSync(new TextEncoder().encode(line));
 * }
 * equal(Deno.readTextFileSync(`${dir}/rank_0.log`), "a\nb\n");
 * Deno.symlinkSync(`${dir}/rank_0.log`, `${dir}/rank_1.log`);
 * throws(() => openAppend(`${dir}/rank_1.log`, "log file"), /it is a symbolic link/);
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export function openAppend(path: string, what: string): Deno.FsFile {
  for (let attempt = 0;; attempt++) {
    const before = checkOwnFile(path, what);
    if (before === null) {
      try {
        return Deno.openSync(path, { write: true, createNew: true });
      } catch (error) {
        // Someone made it in between: look again, once.
        if (error instanceof Deno.errors.AlreadyExists && attempt === 0) continue;
        throw error;
      }
    }
    const file = Deno.openSync(path, { append: true });
    const after = file.statSync();
    if (after.dev === before.dev && after.ino === before.ino) return file;
    file.close();
    throw new UnsafePathError(
      path,
      `refusing the ${what} ${path}: it was replaced while being opened; remove it`,
    );
  }
}

/**
 * Writes `path` through a temporary file in the same folder: `write` fills it, then it is synced,
 * renamed over `path`, and the folder is synced so that the rename itself is durable. On any
 * failure the temporary file is removed and `path` is left as it was. The temporary file is
 * created with O_EXCL and the rename replaces whatever `path` is, a link included: nothing is
 * written through a link.
 *
 * @param path The file to create or replace.
 * @param write Writes the new contents to the open temporary file.
 * @ignore dtrain-internal (src/checkpoint/mod.ts re-exports it with `export *`)
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { writeFileAtomic } from "./private_files.ts";
 * const dir = Deno.makeTempDirSync();
 * writeFileAtomic(`${dir}/a.bin`, (file) => file.writeSync(new Uint8Array([1, 2])));
 * equal(Deno.readFileSync(`${dir}/a.bin`).length, 2);
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export function writeFileAtomic(path: string, write: (file: Deno.FsFile) => void): void {
  const folder = dirname(path);
  const temp = `${folder}/${temporaryPrefix(path)}${crypto.randomUUID()}.tmp`;
  const file = Deno.openSync(temp, { write: true, createNew: true });
  try {
    try {
      write(file);
      file.syncSync();
    } finally {
      file.close();
    }
    Deno.renameSync(temp, path);
  } catch (error) {
    try {
      Deno.removeSync(temp);
    } catch {
      // Nothing more can be done; the original error is the one worth reporting.
    }
    throw error;
  }
  const dir = Deno.openSync(folder, { read: true });
  try {
    dir.syncSync();
  } finally {
    dir.close();
  }
}

/**
 * `writeFileAtomic` for text.
 *
 * @param path The file to create or replace.
 * @param text Its new contents.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { writeTextFileAtomic } from "./private_files.ts";
 * const dir = Deno.makeTempDirSync();
 * writeTextFileAtomic(`${dir}/a.json`, "{}");
 * equal(Deno.readTextFileSync(`${dir}/a.json`), "{}");
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export function writeTextFileAtomic(path: string, text: string): void {
  writeFileAtomic(path, (file) => writeAll(file, new TextEncoder().encode(text)));
}

/** The name every temporary file for `path` starts with, inside `path`'s folder. */
function temporaryPrefix(path: string): string {
  return `.${basename(path)}.`;
}

/**
 * Removes temporary files that saves of `path` left behind when their process was killed
 * mid-write. Only for a caller that owns `path`: a save of it running concurrently would fail.
 *
 * @param path The file whose leftovers to remove.
 * @returns The names removed.
 */
export function removeStaleTemporaries(path: string): string[] {
  const folder = dirname(path), prefix = temporaryPrefix(path);
  const removed: string[] = [];
  let entries: Iterable<Deno.DirEntry>;
  try {
    entries = Deno.readDirSync(folder);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return removed;
    throw error;
  }
  for (const entry of entries) {
    if (entry.isFile && entry.name.startsWith(prefix) && entry.name.endsWith(".tmp")) {
      Deno.removeSync(`${folder}/${entry.name}`);
      removed.push(entry.name);
    }
  }
  return removed;
}

/**
 * A mode as `ls` would show its permission bits in octal: `0755`, `01777`.
 *
 * @param info A file's information.
 * @returns Its mode, in octal.
 */
export function octal(info: Deno.FileInfo): string {
  return `0${((info.mode ?? 0) & 0o7777).toString(8)}`;
}

function modeAndOwner(info: Deno.FileInfo): string {
  return `mode ${octal(info)}, owner uid ${info.uid}`;
}

function writableByOthers(info: Deno.FileInfo): boolean {
  return ((info.mode ?? 0) & 0o022) !== 0;
}

function sticky(info: Deno.FileInfo): boolean {
  return ((info.mode ?? 0) & 0o1000) !== 0;
}
