/**
 * The launcher's on-demand dump signal, SIGUSR1, held so that Deno's inspector never sees it.
 *
 * [Note: SIGUSR1 never reaches the inspector]
 * From 2.9.2, Deno answers SIGUSR1 by opening its V8 inspector on 127.0.0.1:9229, without
 * authentication, for the rest of the process's life (installed 500 ms after start, alongside any
 * `Deno.addSignalListener`, with no switch to turn it off). In the launcher, which runs as the
 * job's user (often root), that hands the job to any local user who reads the URL from
 * `/json/list`. So the launcher blocks SIGUSR1 in every thread: a signal mask is per thread and
 * inherited by the threads a thread creates and across exec, but Deno's threads exist before any
 * script runs, so the launcher blocks it on its main thread and re-executes itself (same pid,
 * same arguments and environment). A blocked signal stays pending at the process, where no
 * handler of Deno's runs; the launcher takes it with a zero-timeout `sigtimedwait` on its poll.
 * Its workers inherit the mask, so a stray SIGUSR1 to a worker does nothing either (they are asked
 * for their ledgers through a file: `writeLedgerOnRequest`).
 *
 * `launch()` called from a script that did not hold the signal at its start (a re-exec then would
 * run the script twice) cannot block it in Deno's threads; there the launcher sets SIGUSR1 to be
 * ignored instead, again on each poll since Deno installs its handler late, and no dump can be
 * asked for by signal (`deno task debug LOG_DIR` still reads the files afterwards).
 * @module
 */

import { libc, SIG_BLOCK, SIGSET_BYTES, SIGUSR1 } from "../../ffi/libc.ts";

/** The set holding only SIGUSR1: bit SIGUSR1 - 1 of the first word. */
function usr1Set(): BigUint64Array {
  const set = new BigUint64Array(SIGSET_BYTES / 8);
  set[0] = 1n << BigInt(SIGUSR1 - 1);
  return set;
}

/** Whether SIGUSR1 is blocked on the calling (main) thread; null where libc cannot be opened. */
export function dumpSignalHeld(): boolean | null {
  const c = libc();
  if (c === null) return null;
  const mask = new BigUint64Array(SIGSET_BYTES / 8);
  if (c.pthread_sigmask(SIG_BLOCK, null, new Uint8Array(mask.buffer)) !== 0) return null;
  return (mask[0] & usr1Set()[0]) !== 0n;
}

/**
 * At the start of an entry point that may launch (`deno task launch`, `deno task train`): blocks
 * SIGUSR1 and re-executes this process so that every thread has it blocked (see the note above).
 * Returns only when the signal is held, or where it cannot be (not Linux, no FFI permission, exec
 * refused: then it says so on stderr and the launcher falls back to ignoring the signal).
 * Must run before the script does anything it would not want done twice.
 */
export function holdDumpSignal(): void {
  const held = dumpSignalHeld();
  if (held !== false) return;
  const c = libc()!;
  c.pthread_sigmask(SIG_BLOCK, new Uint8Array(usr1Set().buffer), null);
  // The command line as the kernel has it, with Deno's own flags (--v8-flags, -A, ...).
  const argv = Deno.readTextFileSync("/proc/self/cmdline").split("\0").slice(0, -1);
  const encoder = new TextEncoder();
  const strings = argv.map((a) => encoder.encode(`${a}\0`));
  const pointers = new BigUint64Array(strings.length + 1); // NULL-terminated
  strings.forEach((s, i) =>
    pointers[i] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(s)))
  );
  c.execv(encoder.encode(`${Deno.execPath()}\0`), new Uint8Array(pointers.buffer));
  // execv returns only on failure.
  console.error(
    "launch: could not re-execute to hold SIGUSR1; it is ignored instead, and dumps by signal are off",
  );
}

/**
 * Takes a pending SIGUSR1 if there is one (never waits).
 *
 * @returns Whether a dump was asked for since the last call.
 */
export function takeDumpSignal(): boolean {
  const c = libc();
  if (c === null) return false;
  const info = new Uint8Array(SIGSET_BYTES);
  const noWait = new BigInt64Array(2);
  const set = new Uint8Array(usr1Set().buffer);
  let taken = false;
  // Standard signals do not queue: one pending SIGUSR1 however many were sent.
  while (c.sigtimedwait(set, info, new Uint8Array(noWait.buffer)) === SIGUSR1) taken = true;
  return taken;
}

/** sighandler_t SIG_IGN. */
const SIG_IGN = 1n;

/**
 * Where the signal is not held (see the note above): sets SIGUSR1 to be ignored, so that Deno's
 * inspector handler, installed 500 ms after start, is replaced. Call again on every poll.
 */
export function ignoreDumpSignal(): void {
  const c = libc();
  if (c === null) return;
  c.signal(SIGUSR1, Deno.UnsafePointer.create(SIG_IGN));
}

/**
 * Watches for dump requests while a job runs: every `intervalMs` a held SIGUSR1 is taken and
 * `onDump` runs; where it is not held, it is ignored again instead.
 *
 * @param onDump What a request does.
 * @param intervalMs How often to look.
 * @returns A function that stops watching.
 */
export function watchDumpSignal(onDump: () => void, intervalMs = 100): () => void {
  const held = dumpSignalHeld() === true;
  if (!held) ignoreDumpSignal();
  const timer = setInterval(() => {
    if (!held) ignoreDumpSignal();
    else if (takeDumpSignal()) onDump();
  }, intervalMs);
  Deno.unrefTimer(timer);
  return () => clearInterval(timer);
}
