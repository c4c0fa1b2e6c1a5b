/**
 * The point-to-point calls the stages use (dist's isend and irecv once they land).
 * @module
 */

import type { ProcessGroup } from "../../dist/process_group.ts";
import type { Tensor } from "../../tensor/tensor.ts";

/** Where a message goes and how it is told apart. */
export interface P2POptions {
  /** The group. */
  group?: ProcessGroup;
  /** The tag. */
  tag?: number;
}

/** Sends `t` to global rank `dst`. */
export function isend(_t: Tensor, dst: number, _o?: P2POptions): Promise<void> {
  return Promise.reject(new Error(`pipeline: no point-to-point send to rank ${dst} yet`));
}

/** Receives into `t` from global rank `src`. */
export function irecv(_t: Tensor, src: number, _o?: P2POptions): Promise<void> {
  return Promise.reject(new Error(`pipeline: no point-to-point receive from rank ${src} yet`));
}
