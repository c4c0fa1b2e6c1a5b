/**
 * A run's record beside its snapshot: `metrics.jsonl`, one JSON object per logged step, per
 * epoch and (iteration-based runs) per evaluation, appended as they happen, and `report.html`, the page drawn from them (see report.ts),
 * rewritten at every epoch. Only rank 0 keeps one.
 * @module
 */

import { dirname, join } from "node:path";
import { checkOwnFile, openAppend, writeTextFileAtomic } from "../io/private_files.ts";
import { writeAll } from "../io/write_all.ts";
import type { TrainConfig } from "./config.ts";
import { loadReportAssets, renderReport, type ReportAssets } from "./report.ts";
import { ownRunFolder } from "./snapshot.ts";

/** One line of `metrics.jsonl`. */
export interface MetricRecord {
  /** A logged step, the end of an epoch, or an iteration-based run's `estimate_loss`. */
  kind: "step" | "epoch" | "eval";
  /** Optimizer steps over the whole run, resumed ones included (an iteration-based run's iter). */
  step: number;
  /** The epoch (from 1) the step belongs to, or that ended; 0 in an iteration-based run. */
  epoch: number;
  /**
   * Training loss: averaged over the ranks since the last log, or over the epoch; rank 0's last
   * micro-batch's in an iteration-based run (as nanoGPT logs it), or its estimate at an eval.
   */
  loss: number;
  /** An evaluation's estimate of the training loss (mean over `evalIters` random batches). */
  trainLoss?: number;
  /** The learning rate of the first parameter group. */
  lr: number;
  /** Training samples per second over all ranks: since the last log, or over the epoch. */
  samplesPerSecond: number;
  /** The L2 norm of all gradients at this step (steps only). */
  gradNorm?: number;
  /** Test-set accuracy in [0, 1] after the epoch; null when the task has no test set. */
  testAccuracy?: number | null;
  /** A language model's validation loss (nats per token) after the epoch. */
  validationLoss?: number | null;
  /** When it was recorded (ISO 8601). */
  time: string;
}

/** Rank 0's record of a run: appends metrics and redraws the report. */
export class RunLog {
  readonly metricsPath: string;
  readonly reportPath: string;
  readonly #records: MetricRecord[];

  private constructor(
    readonly config: TrainConfig,
    readonly worldSize: number,
    readonly assets: ReportAssets,
    records: MetricRecord[],
  ) {
    const dir = dirname(config.snapshot);
    this.metricsPath = join(dir, "metrics.jsonl");
    this.reportPath = join(dir, "report.html");
    this.#records = records;
  }

  /**
   * Opens the run's record. A run that resumed at step `resumedAt` keeps what came before it
   * (and drops what a killed predecessor logged after its last snapshot, work that is redone); a
   * fresh run (`resumedAt` null) starts an empty file.
   */
  static async open(
    config: TrainConfig,
    worldSize: number,
    resumedAt: number | null,
  ): Promise<RunLog> {
    ownRunFolder(config.snapshot);
    const metricsPath = join(dirname(config.snapshot), "metrics.jsonl");
    let records: MetricRecord[] = [];
    // Read only when it is a plain file of ours: a link planted in a shared folder (as /tmp) is
    // refused, not followed (see [Note: no writes through planted links] in io/private_files.ts).
    if (resumedAt !== null && checkOwnFile(metricsPath, "run record") !== null) {
      const text = Deno.readTextFileSync(metricsPath);
      records = text.split("\n").filter((l) => l.trim()).flatMap((line) => {
        try {
          return [JSON.parse(line) as MetricRecord];
        } catch {
          return []; // a line cut short by a kill
        }
      }).filter((r) => r.step <= resumedAt);
    }
    const log = new RunLog(config, worldSize, await loadReportAssets(), records);
    writeTextFileAtomic(log.metricsPath, records.map((r) => JSON.stringify(r) + "\n").join(""));
    log.writeReport(); // there to open from the start, with what a resumed run had
    return log;
  }

  /** The records so far. */
  get records(): readonly MetricRecord[] {
    return this.#records;
  }

  /** Appends a record to `metrics.jsonl`; an epoch's or evaluation's also redraws the report. */
  add(record: Omit<MetricRecord, "time">): void {
    const full = { ...record, time: new Date().toISOString() };
    this.#records.push(full);
    using file = openAppend(this.metricsPath, "run record");
    writeAll(file, new TextEncoder().encode(JSON.stringify(full) + "\n"));
    if (record.kind !== "step") this.writeReport();
  }

  /** Writes `report.html` atomically (a reader never sees half a page). */
  writeReport(): void {
    writeTextFileAtomic(
      this.reportPath,
      renderReport(this.#records, this.config, this.worldSize, this.assets),
    );
  }
}
