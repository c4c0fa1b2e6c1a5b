/**
 * The one error type of checkpoints: a refused or failed save or load, naming the file. It lives
 * with the file format, which throws it first; `checkpoint` re-exports it and throws it too.
 * @module
 */

/**
 * A checkpoint that could not be written, or a file that is not a valid checkpoint. The message
 * starts with the file's path and says what is wrong and the value seen.
 *
 * @example Telling a bad file from other failures
 * ```ts
 * import assert from "node:assert/strict";
 * import { CheckpointError } from "./errors.ts";
 * const err = new CheckpointError("model.safetensors", "header is not valid JSON");
 * assert.ok(err instanceof Error);
 * assert.equal(err.message, "model.safetensors: header is not valid JSON");
 * ```
 */
export class CheckpointError extends Error {
  /** The checkpoint file concerned, as the caller named it. */
  readonly path: string;

  /**
   * Makes the error; the message is `path: problem`.
   *
   * @param path The checkpoint file concerned.
   * @param problem What is wrong, naming the tensor or field and the value seen.
   * @param options The underlying cause, if any.
   */
  constructor(path: string, problem: string, options?: ErrorOptions) {
    super(`${path}: ${problem}`, options);
    this.name = "CheckpointError";
    this.path = path;
  }
}
