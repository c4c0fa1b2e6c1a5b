/**
 * What pipeline_3d_test.ts and its worker share: the batch size, the microbatches and the
 * scenarios.
 * @module
 */

/** Sequences per batch (each dp rank trains on half), microbatches per step. */
export const ROWS = 8, MICROBATCHES = 4;

/**
 * One scenario: the schedule, full activation checkpointing or none, and the blocks per stage
 * (interleaved: 4 stages, two per pp rank, the first holding the embeddings alone and the last
 * the head alone).
 */
export interface Case3D {
  label: string;
  schedule: "gpipe" | "1f1b" | "interleaved";
  ac: boolean;
  layersPerStage?: number[];
}
