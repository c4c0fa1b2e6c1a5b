/**
 * The command line of `checkpoint.consolidate`: `deno task consolidate <dir> <out.safetensors>`
 * writes a sharded checkpoint's model as one safetensors file (for PyTorch, nanoGPT, or any
 * single-process dtrain run).
 * @module
 */

import { consolidate } from "./sharded.ts";

const USAGE = "usage: deno task consolidate <checkpoint dir> <out.safetensors>";

/**
 * Runs the command line on `args` and returns the exit code; errors are printed, not thrown.
 *
 * @param args The arguments after the script name.
 * @returns 0 when the file was written, 2 for bad usage, 1 when the checkpoint was refused.
 *
 * @example Bad usage prints the usage line and returns 2
 * ```ts
 * import assert from "node:assert/strict";
 * import { main } from "./sharded_cli.ts";
 * assert.equal(main(["only-one-argument"]), 2);
 * ```
 */
export function main(args: string[]): number {
  if (args.length !== 2 || args.some((a) => a.startsWith("-"))) {
    console.error(`${USAGE}\n(got ${args.length} argument(s): ${args.join(" ")})`);
    return 2;
  }
  const [dir, out] = args;
  try {
    consolidate(dir, out);
  } catch (err) {
    console.error(`consolidate: ${(err as Error).message}`);
    return 1;
  }
  console.log(`consolidated ${dir} into ${out}`);
  return 0;
}

if (import.meta.main) Deno.exit(main(Deno.args));
