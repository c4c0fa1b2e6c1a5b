/**
 * Replacing a file so that readers, and the disk after a crash, see either the old contents or
 * the new ones, never a mix.
 * @module
 */

import { basename, dirname } from "node:path";

/**
 * Writes `path` through a temporary file in the same folder: `write` fills it, then it is synced,
 * renamed over `path`, and the folder is synced so that the rename itself is durable. On any
 * failure the temporary file is removed and `path` is left as it was.
 *
 * @param path The file to create or replace.
 * @param write Writes the new contents to the open temporary file.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
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
