/**
 * The progress bar of `deno task prepare`, on stderr: redrawn in place on a terminal, otherwise
 * one line per tenth of the input (for logs), and nothing at all for small inputs off a terminal.
 * @module
 */

import { writeAll } from "../io/write_all.ts";

/** Inputs at least this large (bytes) show progress even off a terminal. */
export const PROGRESS_MIN_SIZE = 16 << 20;

/** Erases the rest of the line after a carriage return (ANSI "erase in line"). */
const REDRAW = "\r\x1b[K";
const WIDTH = 30;

/**
 * A progress callback for prepare's `progress` option, or undefined when no bar is wanted:
 * stderr is not a terminal and the input is under {@linkcode PROGRESS_MIN_SIZE}.
 *
 * @param size The input's size in bytes (what the bar shows).
 * @param tty Whether stderr is a terminal.
 * @param write Where the bar goes (stderr).
 */
export function progressBar(
  size: number,
  tty: boolean = Deno.stderr.isTerminal(),
  write: (text: string) => void = (t) => writeAll(Deno.stderr, new TextEncoder().encode(t)),
): ((done: number, total: number) => void) | undefined {
  if (!tty && size < PROGRESS_MIN_SIZE) return undefined;
  const start = performance.now();
  let lastTenth = -1, finished = false;
  return (done, total) => {
    if (finished) return;
    const fraction = total > 0 ? Math.min(done / total, 1) : 1;
    finished = fraction >= 1;
    const mb = fraction * size / 1e6;
    const seconds = (performance.now() - start) / 1000;
    const rate = seconds > 0 ? mb / seconds : 0;
    const filled = Math.round(fraction * WIDTH);
    const line = `prepare: [${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}] ` +
      `${(100 * fraction).toFixed(0).padStart(3)}%  ${mb.toFixed(1)}/${
        (size / 1e6).toFixed(1)
      } MB` +
      `  ${rate.toFixed(2)} MB/s`;
    if (tty) {
      write(REDRAW + line + (finished ? "\n" : ""));
      return;
    }
    const tenth = Math.floor(fraction * 10);
    if (tenth > lastTenth) {
      lastTenth = tenth;
      write(line + "\n");
    }
  };
}
