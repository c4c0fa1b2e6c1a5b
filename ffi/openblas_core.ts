/**
 * Chooses OpenBLAS's kernels from the CPU's feature flags before libopenblas loads. OpenBLAS built
 * with DYNAMIC_ARCH (Debian's) detects the core by CPU model, and a virtual machine that reports
 * only "Intel(R) Xeon(R) Processor" gets the generic Prescott (SSE3) kernels: a 2.9x slower
 * attention kernel on an AVX-512 machine. OpenBLAS reads `OPENBLAS_CORETYPE` when it loads.
 * @module
 */

/**
 * The OpenBLAS core type for a CPU with these `/proc/cpuinfo` flags: the widest kernels the flags
 * allow, or undefined to leave the choice to OpenBLAS.
 *
 * @param flags The CPU's feature flags.
 * @returns `"SkylakeX"` (AVX-512 F, BW, VL and DQ), `"Haswell"` (AVX2 and FMA), or undefined.
 *
 * @example Pick from flags
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { coreTypeFor } from "./openblas_core.ts";
 * assertEquals(coreTypeFor(new Set(["avx2", "fma"])), "Haswell");
 * assertEquals(coreTypeFor(new Set(["sse3"])), undefined);
 * ```
 */
export function coreTypeFor(flags: ReadonlySet<string>): string | undefined {
  if (["avx512f", "avx512bw", "avx512vl", "avx512dq"].every((f) => flags.has(f))) {
    return "SkylakeX";
  }
  if (flags.has("avx2") && flags.has("fma")) return "Haswell";
  return undefined;
}

/**
 * Sets `OPENBLAS_CORETYPE` for this process (and the processes it starts) from /proc/cpuinfo,
 * unless it is set already: a user's value always wins, since some machines set it on purpose
 * (older OpenBLAS builds crash on processors they misdetect). Call it before libopenblas loads.
 *
 * @returns The core type in effect, or undefined when OpenBLAS will detect it itself.
 */
export function preferOpenblasCore(): string | undefined {
  const given = Deno.env.get("OPENBLAS_CORETYPE");
  if (given !== undefined) return given;
  let cpuinfo: string;
  try {
    cpuinfo = Deno.readTextFileSync("/proc/cpuinfo");
  } catch {
    return undefined; // not Linux, or not readable: OpenBLAS detects on its own
  }
  const flags = new Set(/^flags\s*:(.*)$/m.exec(cpuinfo)?.[1].trim().split(/\s+/) ?? []);
  const core = coreTypeFor(flags);
  if (core !== undefined) Deno.env.set("OPENBLAS_CORETYPE", core);
  return core;
}

/**
 * The name of the core whose kernels OpenBLAS runs (`openblas_get_corename`), for benchmark
 * reports.
 *
 * @param getCorename The `openblas_get_corename` symbol, null when the BLAS is not OpenBLAS.
 * @returns The name, e.g. `"SkylakeX"` (`"Prescott"` is the generic fallback), or undefined.
 */
export function openblasCoreName(
  getCorename: (() => Deno.PointerValue) | null,
): string | undefined {
  const name = getCorename?.();
  return name ? Deno.UnsafePointerView.getCString(name) : undefined;
}
