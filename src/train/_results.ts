/**
 * What the training loop reports: for a whole run ({@linkcode TrainResult}) and for one pass over
 * an epoch ({@linkcode EpochResult}).
 * @module
 */

/** What a finished run reports. */
export interface TrainResult {
  /** Epochs completed, resumed ones included. */
  epochsRun: number;
  /** Epochs run by this call (0 when the snapshot had them all). */
  epochsHere: number;
  /** Mean training loss of the last epoch run (NaN if none ran). */
  lastLoss: number;
  /** Test accuracy of the final model (null without a test set, or for a language model). */
  testAccuracy: number | null;
  /** A language model's validation loss in nats per token (null for other tasks). */
  validationLoss: number | null;
  /** Training samples per second over the epochs run here, summed over ranks. */
  samplesPerSecond: number;
  /** Optimizer steps over the whole run, resumed ones included. */
  step: number;
  /** Optimizer steps run by this call. */
  stepsHere: number;
  /** Whether `--max-steps` ended the run (perhaps in the middle of an epoch). */
  stoppedByMaxSteps: boolean;
}

/** How one pass over (the rest of) an epoch went. */
export interface EpochResult {
  /** Mean training loss over the ranks. */
  loss: number;
  samplesPerSecond: number;
  /** The held-out score after the pass: test accuracy, or a language model's validation loss. */
  score: number | null;
  /** Steps run in this pass. */
  steps: number;
  /** Global samples of the epoch consumed when the pass ended short of it (else 0). */
  position: number;
}
