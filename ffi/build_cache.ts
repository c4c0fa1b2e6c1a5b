/**
 * The self-build cache's trust rules: where the cache is, which of its folders and libraries may
 * be used, and the record that says a build finished.
 *
 * [Note: a private build cache]
 * A library in the cache runs as whoever loads it, and its folder's name is computable from the
 * public sources, so another local user who can write there owns the job. Hence, as PyTorch's
 * `cpp_extension` moved its build folder off a shared `/tmp`: the cache is per user (DTRAIN_CACHE,
 * `$XDG_CACHE_HOME/dtrain`, `~/.cache/dtrain`, else `$TMPDIR/dtrain-cache-<uid>`), created with mode
 * 0700; the cache and each `<version>-<hash>/` folder in it are used only when they belong to this
 * user and nobody else can write to them, and no other user (root aside) can rename a folder above
 * them, else refused with an error naming the path and its owner: the rules every folder the job
 * writes in follows (`ownFolder`, [Note: no writes through planted links] in
 * src/io/private_files.ts), without the sharing a run folder may have.
 * A library is used only when it belongs to this user, is writable by nobody else, and matches its
 * record (`<library>.sha256`, its SHA-256, written last, after the library is in place); anything
 * else (an empty or truncated file, a build killed midway, a planted file) is rebuilt.
 * @module
 */

import { createHash } from "node:crypto";
import { join } from "node:path";
import { octal, ownFolder, UnsafePathError, writeTextFileAtomic } from "../src/io/private_files.ts";

/** A cache folder that another user owns or may write to; the message names it and its owner. */
export class UnsafeCacheError extends Error {
  /**
   * @param message What is wrong, naming the path.
   * @param options The refusal of io/private_files.ts it comes from.
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UnsafeCacheError";
  }
}

/**
 * The cache's root: `DTRAIN_CACHE`, else `$XDG_CACHE_HOME/dtrain`, else `$HOME/.cache/dtrain`,
 * else a folder of this user's own under the temporary folder (never one shared by all users).
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { cacheRoot } from "./build_cache.ts";
 * Deno.env.set("DTRAIN_CACHE", "/tmp/dtrain-cache");
 * assertEquals(cacheRoot(), "/tmp/dtrain-cache");
 * Deno.env.delete("DTRAIN_CACHE");
 * ```
 */
export function cacheRoot(): string {
  const explicit = Deno.env.get("DTRAIN_CACHE");
  if (explicit) return explicit;
  const xdg = Deno.env.get("XDG_CACHE_HOME");
  if (xdg) return join(xdg, "dtrain");
  const home = Deno.env.get("HOME");
  if (home) return join(home, ".cache", "dtrain");
  return join(Deno.env.get("TMPDIR") || "/tmp", `dtrain-cache-${Deno.uid()}`);
}

/**
 * Creates `path` (mode 0700) unless it exists, then checks that it is private: this user's,
 * writable by nobody else, under folders no other user can rename (`ownFolder`, without the
 * sharing a run folder may have).
 *
 * @param path The folder.
 * @param what What it is, for the error ("build cache", "build cache entry").
 * @throws UnsafeCacheError naming the path and its owner or mode.
 */
export function privateFolder(path: string, what: string): void {
  try {
    ownFolder(path, {
      what,
      fix: "remove it, or set DTRAIN_CACHE to a folder of your own",
      mode: 0o700,
    });
  } catch (error) {
    if (error instanceof UnsafePathError) {
      throw new UnsafeCacheError(error.message, { cause: error });
    }
    throw error;
  }
}

/**
 * Why the library at `path` may not be loaded, or null when it may: it must be a plain file of
 * this user's that nobody else can write, and match its build record.
 *
 * @param path The library in a (private) cache entry.
 * @returns The reason, or null.
 */
export function untrustedLibrary(path: string): string | null {
  let info;
  try {
    info = Deno.lstatSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "missing";
    throw error;
  }
  const uid = Deno.uid();
  if (!info.isFile) return "not a plain file";
  if (info.uid !== uid) return `it belongs to uid ${info.uid}, not to this user (uid ${uid})`;
  if ((info.mode! & 0o022) !== 0) return `others can write to it (mode ${octal(info)})`;
  let record;
  try {
    record = Deno.readTextFileSync(recordPath(path)).trim();
  } catch {
    return "it has no build record (its build did not finish)";
  }
  if (record !== sha256(path)) {
    return "it does not match its build record (a truncated or changed file)";
  }
  return null;
}

/**
 * Puts a finished build in place: `built` becomes `path` (readable by all, writable by this user
 * only), and then, last, its record.
 *
 * @param built The freshly linked library, in the same folder.
 * @param path Where it goes.
 */
export async function commitLibrary(built: string, path: string): Promise<void> {
  await Deno.chmod(built, 0o755); // whatever the umask, so that it passes untrustedLibrary
  const digest = sha256(built);
  await Deno.rename(built, path);
  writeTextFileAtomic(recordPath(path), `${digest}\n`);
}

function recordPath(library: string): string {
  return `${library}.sha256`;
}

function sha256(path: string): string {
  return createHash("sha256").update(Deno.readFileSync(path)).digest("hex");
}
