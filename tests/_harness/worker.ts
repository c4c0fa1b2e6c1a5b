/**
 * Helpers for worker scripts run by `runRanks`: tensor-shaped views of typed arrays and a
 * main wrapper that prints one JSON result line and sets the exit code.
 * @module
 */

import type { TensorLike } from "../../src/distributed/backend.ts";

/** A typed array seen as a contiguous f32 or i32 tensor. */
export interface ArrayTensor extends TensorLike {
  readonly data: Float32Array | Int32Array;
  readonly dtype: "f32" | "i32";
  readonly numel: number;
}

/** Wraps `data` (kept alive by the wrapper) as a tensor. */
export function tensorOf(data: Float32Array | Int32Array): ArrayTensor {
  return {
    data,
    dtype: data instanceof Float32Array ? "f32" : "i32",
    numel: data.length,
    isContiguous: () => true,
    ptr: Deno.UnsafePointer.of(data as Float32Array<ArrayBuffer>),
  };
}

/**
 * Runs `main`, prints `{ ok: true, ...result }` or `{ ok: false, error, code }` as the last
 * stdout line, and exits 0 or 1.
 */
export async function runWorker(main: () => Promise<Record<string, unknown>>): Promise<never> {
  try {
    const result = await main();
    console.log(JSON.stringify({ ok: true, ...result }));
    Deno.exit(0);
  } catch (err) {
    const e = err as Error & { code?: string };
    console.error(e.stack ?? String(e));
    console.log(JSON.stringify({ ok: false, error: e.message, code: e.code }));
    Deno.exit(1);
  }
}

/** An integer in env `name`, or `fallback`. */
export function envInt(name: string, fallback: number): number {
  const v = Deno.env.get(name);
  return v === undefined ? fallback : Number(v);
}
