/**
 * The per-epoch progress line: step count, loss, samples/s and ETA. On a terminal it redraws one
 * line in place; otherwise (logs, CI, the launcher's pipes) it prints plain lines.
 * @module
 */

import { writeAll } from "../io/write_all.ts";

/** Formats seconds as `1m05s` / `42s`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "?";
  const s = Math.round(seconds);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}

/** Tracks one epoch and prints its progress. */
export class Progress {
  readonly #tty: boolean;
  readonly #start = performance.now();
  #lastDraw = 0;
  #samples = 0;
  #lossSum = 0;
  #lossCount = 0;
  #step = 0;

  /**
   * @param epoch The epoch number (0-based).
   * @param epochs Total epochs.
   * @param steps Steps in this epoch.
   * @param write Where lines go (stdout by default).
   * @param tty Whether to redraw in place (default: stdout is a terminal).
   */
  constructor(
    readonly epoch: number,
    readonly epochs: number,
    readonly steps: number,
    readonly write: (text: string) => void = (t) =>
      writeAll(Deno.stdout, new TextEncoder().encode(t)),
    tty = Deno.stdout.isTerminal(),
  ) {
    this.#tty = tty;
  }

  /** Records one finished step. */
  update(loss: number, samples: number): void {
    this.#step++;
    this.#samples += samples;
    this.#lossSum += loss;
    this.#lossCount++;
    const now = performance.now();
    if (this.#tty && now - this.#lastDraw > 200) {
      this.#lastDraw = now;
      this.write(`\r${this.line()}`);
    }
  }

  /** The mean loss so far in this epoch. */
  get meanLoss(): number {
    return this.#lossCount ? this.#lossSum / this.#lossCount : NaN;
  }

  /** Samples per second so far. */
  get samplesPerSecond(): number {
    return this.#samples / Math.max((performance.now() - this.#start) / 1000, 1e-9);
  }

  /** The current progress line. */
  line(): string {
    const elapsed = (performance.now() - this.#start) / 1000;
    const eta = this.#step ? (elapsed / this.#step) * (this.steps - this.#step) : NaN;
    return `epoch ${this.epoch + 1}/${this.epochs} step ${this.#step}/${this.steps} ` +
      `loss ${this.meanLoss.toFixed(4)} ${this.samplesPerSecond.toFixed(0)} samples/s ` +
      `eta ${formatDuration(eta)}`;
  }

  /** Prints the final line of the epoch, with `extra` (e.g. test accuracy) appended. */
  finish(extra = ""): void {
    this.write(`${this.#tty ? "\r" : ""}${this.line()}${extra ? ` ${extra}` : ""}\n`);
  }
}
