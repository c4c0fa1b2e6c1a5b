/**
 * Finds and opens dtrain's native libraries, with one policy for all of them: each library is
 * opened lazily, once per process, on the first call of its loader; the search order is fixed (an
 * environment variable naming an explicit path, and then nothing else; without it the repository's
 * `build/` folder resolved from this file, else a build of the package's own sources in a cache,
 * made on first use); 64-bit integer parameters take plain numbers.
 * @module
 */

import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { buildLibrary, canBuild } from "./build.ts";

/**
 * [Note: 64-bit integers]
 * Sizes, counts and timeouts are `int64_t`/`uint64_t`/`size_t` in C. Deno converts a JavaScript
 * number passed for such a parameter exactly (sizes stay below 2^53), but its types only admit
 * `bigint`. {@linkcode Symbols} widens those parameters to `number | bigint` once, here, so callers
 * pass numbers and never wrap them in `BigInt(...)`. 64-bit results (`dt_allocated_bytes`) stay
 * `bigint` and are converted where they are read.
 */
type Widen<T> = T extends bigint ? number | bigint : T;
type WidenArgs<F> = F extends (...args: infer A) => infer R
  ? (...args: { [K in keyof A]: Widen<A[K]> }) => R
  : F;

/** A library's functions as callers see them (see [Note: 64-bit integers]). */
export type Symbols<S extends Deno.ForeignLibraryInterface> = {
  [K in keyof S]: WidenArgs<Deno.DynamicLibrary<S>["symbols"][K]>;
};

/**
 * Opens the shared library `fileName` (e.g. `libdtrain.so`) with the symbol table `symbols`.
 *
 * @param fileName The library's file name inside `build/`.
 * @param envVar The environment variable that may name an explicit path instead.
 * @param symbols The typed symbol table.
 * @returns The opened library's functions.
 * @throws Error naming every path tried and how to build the library, with the `dlopen`
 *   failures as its `cause`.
 */
export function openLibrary<S extends Deno.ForeignLibraryInterface>(
  fileName: string,
  envVar: string,
  symbols: S,
): Symbols<S> {
  const candidates: string[] = [];
  const explicit = Deno.env.get(envVar);
  // An explicit path is the only one tried: when it fails to load, falling back to build/ would
  // run another library than the one asked for (the host CUDA build's tests would run the real
  // one, or the reverse) and say nothing.
  if (explicit) candidates.push(explicit);
  const buildDir = new URL("../build/", import.meta.url);
  if (!explicit && buildDir.protocol === "file:") {
    candidates.push(fileURLToPath(new URL(fileName, buildDir)));
  }
  // No explicit path and no build beside the code (a JSR or URL import): build it from the
  // package's sources into the cache (see [Note: self-building libraries] in ffi/build.ts).
  if (!explicit && !candidates.some((path) => existsSync(path)) && canBuild(fileName)) {
    candidates.push(buildLibrary(fileName));
  }
  const errors: Error[] = [];
  for (const path of candidates) {
    try {
      return Deno.dlopen(path, symbols).symbols as Symbols<S>;
    } catch (cause) {
      errors.push(new Error(`${path}: ${(cause as Error).message}`, { cause }));
    }
  }
  const tried = errors.map((e) => e.message).join("\n  ") || "(no candidate path)";
  throw new Error(
    `could not load ${fileName}; tried:\n  ${tried}\n` +
      `Build it with \`make build\` in the dtrain repository, or set ${envVar} to its path.`,
    { cause: errors.length === 1 ? errors[0] : new AggregateError(errors, `${fileName}: dlopen`) },
  );
}

/**
 * A loader that opens the library on its first call and returns the same functions afterwards.
 *
 * @param fileName The library's file name inside `build/`.
 * @param envVar The environment variable that may name an explicit path instead.
 * @param symbols The typed symbol table.
 * @returns The loader.
 */
export function lazyLibrary<S extends Deno.ForeignLibraryInterface>(
  fileName: string,
  envVar: string,
  symbols: S,
): () => Symbols<S> {
  let opened: Symbols<S> | undefined;
  return () => opened ??= openLibrary(fileName, envVar, symbols);
}
