/**
 * A pipeline schedule as data: each rank's list of compute actions (a forward or a full backward
 * of one microbatch through one stage), generated the way PyTorch's schedules build their
 * `pipeline_order`, so that a schedule can be checked without running it.
 * @module
 */

/** A forward ("F") or full backward ("B") of one microbatch through one stage. */
export interface PipelineAction {
  /** "F": forward; "B": full backward (input and weight gradients together). */
  readonly type: "F" | "B";
  /** The stage's index in the whole pipeline. */
  readonly stage: number;
  /** The microbatch's index. */
  readonly microbatch: number;
}

/** Each rank's actions in the order it runs them, indexed by the rank in the pipeline group. */
export type PipelineOrder = PipelineAction[][];

/** PyTorch's string for an action (`_Action.__repr__`): stage, type, microbatch, as in "2F0". */
export function actionString(a: PipelineAction): string {
  return `${a.stage}${a.type}${a.microbatch}`;
}

/** The trace's name for an action: type and microbatch, then the stage, as in "F3 s1". */
export function actionSpanName(a: PipelineAction): string {
  return `${a.type}${a.microbatch} s${a.stage}`;
}

/**
 * The order as PyTorch's `_format_pipeline_order` prints it: one row per position, one column per
 * rank (positions are each rank's own; idle steps are not shown), padded as PyTorch pads it.
 *
 * @param order Each rank's actions.
 * @returns The table, one line per position, ending in a newline.
 */
export function formatPipelineOrder(order: PipelineOrder): string {
  const steps = Math.max(0, ...order.map((actions) => actions.length));
  const digits = String(Math.max(steps - 1, 0)).length;
  const labels = Array.from({ length: steps }, (_, i) => `Step ${String(i).padStart(digits, "0")}`);
  const cells = order.map((actions) =>
    Array.from({ length: steps }, (_, i) => actions[i] ? actionString(actions[i]) : "")
  );
  // PyTorch sizes column r by its cells and the r-th step label (not the rank label).
  const widths = order.map((_, r) =>
    Math.max((labels[r] ?? "").length, ...cells[r].map((c) => c.length))
  );
  const pad = (text: string, r: number) => text.padEnd(widths[r]);
  const header = " ".repeat((labels[0] ?? "Step 0").length + 2) +
    order.map((_, r) => pad(`Rank ${r}`, r)).join(" ");
  const rows = labels.map((label, i) =>
    `${label}: ${order.map((_, r) => pad(cells[r][i], r)).join(" ")}`
  );
  return [header, ...rows].join("\n") + "\n";
}
