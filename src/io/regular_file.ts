/**
 * Telling a regular file from what else a path may name, before reading it: a directory read as
 * a file fails with an `IsADirectory` error that names no path, and a FIFO blocks the reader.
 * @module
 */

/**
 * What `path` is when it is not a regular file (`"a directory"`, `"a FIFO"`, ...), or null when
 * it is one. Links are followed, as opening the path would.
 *
 * @param path The path about to be read.
 * @returns null for a regular file, otherwise what the path is, for a message.
 * @throws The file system's errors (such as `Deno.errors.NotFound`) as they are.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { notRegularFile } from "./regular_file.ts";
 * const dir = Deno.makeTempDirSync();
 * equal(notRegularFile(dir), "a directory");
 * Deno.writeTextFileSync(`${dir}/a.txt`, "a");
 * equal(notRegularFile(`${dir}/a.txt`), null);
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export function notRegularFile(path: string): string | null {
  const info = Deno.statSync(path);
  if (info.isFile) return null;
  if (info.isDirectory) return "a directory";
  if (info.isFifo) return "a FIFO";
  if (info.isSocket) return "a socket";
  if (info.isCharDevice || info.isBlockDevice) return "a device";
  return "not a regular file";
}
