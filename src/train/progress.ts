/**
 * What the train job prints while an epoch runs. On a terminal (the job's own, or the launcher's:
 * the launcher sets DTRAIN_TTY=1 for its workers when its stdout is one) it redraws one line in
 * place; otherwise (logs, CI, pipes) it prints one plain line per logged step. Either way an
 * epoch ends with one line, and every line carries one loss, labelled: the training loss averaged
 * over the ranks.
 * @module
 */

import { writeAll } from "../io/write_all.ts";

/** Formats seconds as `1m05s` / `42s`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "?";
  const s = Math.round(seconds);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}

/** Whether progress should redraw in place: stdout is a terminal, here or at the launcher. */
export function onTerminal(): boolean {
  return Deno.stdout.isTerminal() || Deno.env.get("DTRAIN_TTY") === "1";
}

/** Erases the rest of the line after a carriage return (ANSI "erase in line"). */
const REDRAW = "\r\x1b[K";

/** Tracks one epoch and prints its progress. */
export class Progress {
  readonly #tty: boolean;
  readonly #start = performance.now();
  /** When the line was last drawn (null: not yet, so the first step draws at once). */
  #lastDraw: number | null = null;
  #samples = 0;
  #step = 0;
  #loss = NaN;
  #lr = NaN;

  /**
   * @param epoch The epoch number (0-based).
   * @param epochs Total epochs.
   * @param steps Steps this epoch will run.
   * @param write Where lines go (stdout by default).
   * @param tty Whether to redraw in place (default: {@linkcode onTerminal}).
   */
  constructor(
    readonly epoch: number,
    readonly epochs: number,
    readonly steps: number,
    readonly write: (text: string) => void = (t) =>
      writeAll(Deno.stdout, new TextEncoder().encode(t)),
    tty = onTerminal(),
  ) {
    this.#tty = tty;
  }

  /** Records one finished step of `samples` samples (over all ranks). */
  update(samples: number): void {
    this.#step++;
    this.#samples += samples;
    const now = performance.now();
    if (this.#tty && (this.#lastDraw === null || now - this.#lastDraw > 200)) {
      this.#lastDraw = now;
      this.write(REDRAW + this.line());
    }
  }

  /**
   * A logged step: `loss` (over the ranks, since the last log) and the learning rate. Printed as
   * its own line unless redrawing, and never for the epoch's last step (its line follows).
   */
  log(loss: number, lr: number): void {
    this.#loss = loss;
    this.#lr = lr;
    if (!this.#tty && this.#step < this.steps) this.write(`${this.line()}\n`);
  }

  /** Clears a redrawn line so that another line (a snapshot's) can be printed; it comes back. */
  clear(): void {
    if (this.#tty && this.#lastDraw !== null) this.write(REDRAW);
  }

  /** Samples per second so far, over all ranks. */
  get samplesPerSecond(): number {
    return this.#samples / Math.max(this.elapsed, 1e-9);
  }

  /** Seconds since the epoch started. */
  get elapsed(): number {
    return (performance.now() - this.#start) / 1000;
  }

  /** The current progress line. */
  line(): string {
    const eta = this.#step ? (this.elapsed / this.#step) * (this.steps - this.#step) : NaN;
    const loss = Number.isNaN(this.#loss) ? "" : ` loss ${this.#loss.toFixed(4)}`;
    const lr = Number.isNaN(this.#lr) ? "" : ` lr ${formatNumber(this.#lr)}`;
    return `epoch ${this.epoch + 1}/${this.epochs} step ${this.#step}/${this.steps}${loss}${lr} ` +
      `${this.samplesPerSecond.toFixed(0)} samples/s eta ${formatDuration(eta)}`;
  }

  /**
   * Prints the epoch's last line: the epoch's mean loss over the ranks, then `extra` (e.g. test
   * accuracy).
   */
  finish(loss: number, extra = ""): void {
    const line = `epoch ${this.epoch + 1}/${this.epochs} step ${this.#step}/${this.steps} ` +
      `loss ${loss.toFixed(4)} ${this.samplesPerSecond.toFixed(0)} samples/s ` +
      `in ${formatDuration(this.elapsed)}${extra ? ` ${extra}` : ""}`;
    this.write(`${this.#tty ? REDRAW : ""}${line}\n`);
  }
}

/** A learning rate as printed: 0.05, 3e-4. */
function formatNumber(x: number): string {
  return x !== 0 && Math.abs(x) < 1e-3 ? x.toExponential(1) : String(Number(x.toPrecision(4)));
}
