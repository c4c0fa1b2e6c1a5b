/**
 * Where an iteration-based job's wall time went, printed at its end: start-up (the process, the
 * data, the model, FSDP), training iterations (the first apart: it pays for first-use costs),
 * evaluation, checkpoints and the end (the final weights and the sample). A user whose small run
 * takes minutes sees at once which part to shrink (`--eval-iters`, `--eval-interval`).
 * @module
 */

/** The parts of a job's wall time, in the order the summary prints them. */
export type TimePart = "iterations" | "evaluation" | "checkpoints" | "start-up" | "end";

const PARTS: readonly TimePart[] = ["iterations", "evaluation", "checkpoints", "start-up", "end"];

/** Milliseconds spent in each part of a job, from the process's start. */
export class TimeSplit {
  readonly #ms: Record<TimePart, number> = {
    iterations: 0,
    evaluation: 0,
    checkpoints: 0,
    "start-up": 0,
    end: 0,
  };
  /** The first training iteration's time, shown apart within `iterations`. */
  firstIterationMs: number | null = null;

  /** Adds `ms` to `part`. */
  add(part: TimePart, ms: number): void {
    this.#ms[part] += ms;
  }

  /** Runs `fn`, adding its time to `part`; resolves to what it returns. */
  async measure<R>(part: TimePart, fn: () => Promise<R> | R): Promise<R> {
    const start = performance.now();
    try {
      return await fn();
    } finally {
      this.add(part, performance.now() - start);
    }
  }

  /** The milliseconds counted in `part`. */
  ms(part: TimePart): number {
    return this.#ms[part];
  }

  /**
   * One line: the wall time (`wallMs`, by default this process's age) and each part with time in
   * seconds and its share of the wall, e.g. `time: 61.2 s: iterations 54.0 s (88%; the first
   * 1.1 s), evaluation 4.1 s (7%), checkpoints 1.9 s (3%), start-up 1.2 s (2%)`. Time no part
   * counted shows as `other`.
   */
  summary(wallMs: number = performance.now()): string {
    const wall = Math.max(wallMs, 1e-9);
    const share = (ms: number) => `${(ms / 1000).toFixed(1)} s (${Math.round(100 * ms / wall)}%`;
    const parts: string[] = [];
    for (const part of PARTS) {
      const ms = this.#ms[part];
      if (ms <= 0 && part !== "iterations") continue;
      const first = part === "iterations" && this.firstIterationMs !== null
        ? `; the first ${(this.firstIterationMs / 1000).toFixed(1)} s`
        : "";
      parts.push(`${part} ${share(ms)}${first})`);
    }
    const other = wallMs - PARTS.reduce((sum, part) => sum + this.#ms[part], 0);
    // Rounding and the few lines between the parts stay unnamed; a real gap is shown.
    if (other > 0.01 * wall && other > 50) parts.push(`other ${share(other)})`);
    return `time: ${(wallMs / 1000).toFixed(1)} s: ${parts.join(", ")}`;
  }
}
