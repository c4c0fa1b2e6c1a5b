/**
 * The `[x, y]` pair of a language-model batch from uint16 token windows, shared by `TokenFile`
 * and `DistributedDataLoader`: the windows go to the device as u16 (half the bytes of i32) and
 * become i32 there through the cast kernel.
 * @module
 */

import { tensor } from "../tensor/creation.ts";
import type { Device } from "../tensor/storage.ts";
import type { Tensor } from "../tensor/tensor.ts";

/** Throws a RangeError naming `op` unless `value` is a positive safe integer. */
export function checkPositive(op: string, name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${op}: ${name} must be a positive integer, got ${value}`);
  }
}

/** `tokens` (host u16) as an i32 tensor of `shape` on `device`. */
function widened(tokens: Uint16Array, shape: number[], device: Device): Tensor {
  const narrow = tensor(tokens, shape, { dtype: "u16", device });
  const wide = narrow.to("i32");
  narrow.dispose();
  return wide;
}

/** Fills `into` with the tokens from token `start` on (`into.length` of them). */
export type ReadTokens = (start: number, into: Uint16Array<ArrayBuffer>) => void;

/**
 * x[b] = tokens[starts[b] .. starts[b] + T) and y[b] the same shifted by one, both i32 [B, T]:
 * only these rows are read from the token stream.
 *
 * @param read Copies tokens out of the stream (a mapped file).
 * @param starts The first token of each row; each row reads T + 1 tokens.
 * @param blockSize T.
 * @param device Where the tensors go.
 * @returns `[x, y]`.
 */
export function windowBatch(
  read: ReadTokens,
  starts: readonly number[],
  blockSize: number,
  device: Device,
): [Tensor, Tensor] {
  const rows = starts.length, shape = [rows, blockSize];
  const x = new Uint16Array(rows * blockSize), y = new Uint16Array(rows * blockSize);
  starts.forEach((s, b) => {
    read(s, x.subarray(b * blockSize, (b + 1) * blockSize));
    read(s + 1, y.subarray(b * blockSize, (b + 1) * blockSize));
  });
  return [widened(x, shape, device), widened(y, shape, device)];
}

/**
 * llm.c's batch: B * T + 1 consecutive tokens, x the first B * T and y the last B * T, as
 * i32 [B, T] (no copy on the host: both are views of `tokens`).
 */
export function contiguousBatch(
  tokens: Uint16Array,
  batchSize: number,
  blockSize: number,
  device: Device,
): [Tensor, Tensor] {
  const n = batchSize * blockSize, shape = [batchSize, blockSize];
  return [
    widened(tokens.subarray(0, n), shape, device),
    widened(tokens.subarray(1, n + 1), shape, device),
  ];
}
