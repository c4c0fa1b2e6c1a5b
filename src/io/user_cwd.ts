/**
 * The folder the user ran the command from. `deno task` runs its tasks in the folder of
 * deno.json (the repository's root), and says where the user was in env INIT_CWD: a relative
 * path the user types (`--data-root ../input.txt`) is theirs, so it is resolved from there.
 * @module
 */

import { fileURLToPath } from "node:url";
import { isAbsolute, resolve } from "node:path";

/** The repository's root: the folder `deno task` runs this project's tasks in. */
const TASK_ROOT = import.meta.url.startsWith("file:")
  ? resolve(fileURLToPath(new URL("../../", import.meta.url)))
  : null;

/**
 * The folder relative paths on the command line are read from: INIT_CWD when this process runs
 * in the folder `deno task` runs tasks in (a process started elsewhere, such as a test's child,
 * inherits INIT_CWD from a task it is not), else the current directory.
 *
 * @example
 * ```ts
 * import { isAbsolute } from "node:path";
 * import { userDir } from "./user_cwd.ts";
 * console.assert(isAbsolute(userDir()));
 * ```
 */
export function userDir(): string {
  const cwd = Deno.cwd();
  const initCwd = Deno.env.get("INIT_CWD");
  if (initCwd && isAbsolute(initCwd) && TASK_ROOT !== null && resolve(cwd) === TASK_ROOT) {
    return initCwd;
  }
  return cwd;
}

/**
 * `path` as the user meant it: absolute, resolved from {@linkcode userDir}. An empty path
 * (a default that means "none") and URLs (`file:`, `https:`, `jsr:`) are returned as they are.
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { userPath } from "./user_cwd.ts";
 * assertEquals(userPath(""), "");
 * assertEquals(userPath("/data/x"), "/data/x");
 * assertEquals(userPath("jsr:@std/path"), "jsr:@std/path");
 * ```
 */
export function userPath(path: string): string {
  if (path === "" || isAbsolute(path) || /^[a-z][a-z0-9+.-]+:/i.test(path)) return path;
  return resolve(userDir(), path);
}
