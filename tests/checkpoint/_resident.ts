// The process's resident memory from /proc/self/status, and its peak since a reset: what the
// streaming checkpoint test and bench/checkpoint_io.ts hold a save's and a load's memory to.

const MIB = 2 ** 20;

/** Whether the peak can be reset here (Linux 4.0+ lets a process reset its own VmHWM). */
export const canResetPeak: boolean = (() => {
  try {
    Deno.writeTextFileSync("/proc/self/clear_refs", "5");
    return true;
  } catch {
    return false;
  }
})();

/** `field` of /proc/self/status ("VmRSS", "VmHWM") in MiB. */
export function statusMiB(field: "VmRSS" | "VmHWM"): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  const kib = status.match(new RegExp(`^${field}:\\s+(\\d+) kB$`, "m"));
  if (kib === null) throw new Error(`/proc/self/status has no ${field}`);
  return Number(kib[1]) * 1024 / MIB;
}

/**
 * Runs `fn` and returns how far the resident set rose above what it was before (MiB), read as
 * VmHWM after resetting it to the current resident set ("5" to /proc/self/clear_refs).
 */
export async function peakRiseMiB(fn: () => unknown): Promise<number> {
  Deno.writeTextFileSync("/proc/self/clear_refs", "5");
  const before = statusMiB("VmRSS");
  await fn();
  return statusMiB("VmHWM") - before;
}
