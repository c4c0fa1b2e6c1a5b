/**
 * What pipeline_3d_test.ts and its worker share: the batch size, the microbatches and the
 * scenarios.
 * @module
 */

/** Sequences per batch (each dp rank trains on half), microbatches per step. */
export const ROWS = 8, MICROBATCHES = 2;

/** One scenario: the schedule, and full activation checkpointing or none. */
export interface Case3D {
  label: string;
  schedule: "gpipe" | "1f1b";
  ac: boolean;
}
