/**
 * Finds and opens dtrain's native libraries. The search order is fixed: an environment variable
 * naming an explicit path first, then the repository's `build/` folder resolved from this file.
 * @module
 */

import { fileURLToPath } from "node:url";

/**
 * Opens the shared library `fileName` (e.g. `libdtrain.so`) with the symbol table `symbols`.
 *
 * @param fileName The library's file name inside `build/`.
 * @param envVar The environment variable that may name an explicit path instead.
 * @param symbols The typed symbol table.
 * @returns The opened library.
 * @throws Error naming every path tried and how to build the library.
 */
export function openLibrary<S extends Deno.ForeignLibraryInterface>(
  fileName: string,
  envVar: string,
  symbols: S,
): Deno.DynamicLibrary<S> {
  const candidates: string[] = [];
  const explicit = Deno.env.get(envVar);
  if (explicit) candidates.push(explicit);
  const buildDir = new URL("../build/", import.meta.url);
  if (buildDir.protocol === "file:") candidates.push(fileURLToPath(new URL(fileName, buildDir)));
  const failures: string[] = [];
  for (const path of candidates) {
    try {
      return Deno.dlopen(path, symbols);
    } catch (cause) {
      failures.push(`${path}: ${(cause as Error).message}`);
    }
  }
  throw new Error(
    `could not load ${fileName}; tried:\n  ${failures.join("\n  ") || "(no candidate path)"}\n` +
      `Build it with \`make build\` in the dtrain repository, or set ${envVar} to its path.`,
  );
}
