/**
 * How activations go forward and gradients backward between stages during a step: handed over
 * in memory between two stages of this process, sent point-to-point to a stage on another rank.
 * An activation travels after a small header with its dtype and shape (the receiver cannot know
 * a microbatch's rows beforehand); a gradient has the shape of the activation it belongs to.
 * Every message has its own tag (kind, destination stage, microbatch), so that a receive matches
 * its send whatever the order the two ranks' schedules post them in.
 * @module
 */

import { irecv, isend } from "./_p2p.ts";
import type { ProcessGroup } from "../../dist/process_group.ts";
import { tensor, zeros } from "../../tensor/creation.ts";
import type { FloatDType } from "../../tensor/dtype.ts";
import type { Tensor } from "../../tensor/tensor.ts";

const DTYPES: FloatDType[] = ["f32", "bf16", "f16"];
const HEADER = 8;
const KIND = { header: 0, activation: 1, gradient: 2 } as const;

/** The stages' messages of one step. */
export class StageExchange {
  #local = new Map<string, Tensor>();
  #sends: Promise<void>[] = [];
  #numStages: number;
  #group: ProcessGroup;
  #rankOf: (stage: number) => number;

  /**
   * @param numStages The pipeline's stages.
   * @param group The pipeline's group.
   * @param rankOf The global rank running a stage.
   */
  constructor(numStages: number, group: ProcessGroup, rankOf: (stage: number) => number) {
    this.#numStages = numStages;
    this.#group = group;
    this.#rankOf = rankOf;
  }

  #tag(kind: number, stage: number, mb: number): number {
    return (mb * this.#numStages + stage) * 3 + kind;
  }

  #isLocal(stage: number): boolean {
    return this.#rankOf(stage) === this.#group.ranks[this.#group.rank];
  }

  #send(t: Tensor, stage: number, kind: number, mb: number): void {
    const data = t.contiguous();
    const work = isend(data, this.#rankOf(stage), this.#group, this.#tag(kind, stage, mb));
    // The tensor must stay alive until its bytes are sent.
    this.#sends.push(Promise.resolve(work).then(() => data.dispose()));
  }

  async #recv(t: Tensor, stage: number, from: number, kind: number, mb: number): Promise<Tensor> {
    await irecv(t, this.#rankOf(from), this.#group, this.#tag(kind, stage, mb));
    return t;
  }

  /** Sends stage `stage`'s output of microbatch `mb` to stage `stage + 1`. */
  sendForward(stage: number, mb: number, output: Tensor): void {
    const to = stage + 1;
    if (this.#isLocal(to)) {
      this.#local.set(`F${to}:${mb}`, output.detach());
      return;
    }
    const dtype = DTYPES.indexOf(output.dtype as FloatDType);
    if (dtype < 0 || output.ndim > HEADER - 2) {
      throw new TypeError(
        `pipeline stage ${stage}: an activation must be f32, bf16 or f16 with at most ` +
          `${HEADER - 2} dimensions, got ${output.dtype} [${output.shape}]`,
      );
    }
    const header = Int32Array.from(
      { length: HEADER },
      (_, i) => i === 0 ? dtype : i === 1 ? output.ndim : output.shape[i - 2] ?? 0,
    );
    this.#send(tensor(header, [HEADER], { dtype: "i32" }), to, KIND.header, mb);
    this.#send(output.detach(), to, KIND.activation, mb);
  }

  /** Receives stage `stage`'s input of microbatch `mb` from stage `stage - 1`. */
  async recvForward(stage: number, mb: number): Promise<Tensor> {
    const from = stage - 1;
    if (this.#isLocal(from)) return this.#take(`F${stage}:${mb}`);
    const header = await this.#recv(
      zeros([HEADER], { dtype: "i32" }),
      stage,
      from,
      KIND.header,
      mb,
    );
    const [dtype, ndim, ...dims] = Array.from(header.toArray());
    header.dispose();
    const shape = dims.slice(0, ndim);
    return this.#recv(zeros(shape, { dtype: DTYPES[dtype] }), stage, from, KIND.activation, mb);
  }

  /** Sends the gradient of stage `stage`'s input of microbatch `mb` to stage `stage - 1`. */
  sendBackward(stage: number, mb: number, grad: Tensor): void {
    const to = stage - 1;
    if (this.#isLocal(to)) this.#local.set(`B${to}:${mb}`, grad);
    else this.#send(grad, to, KIND.gradient, mb);
  }

  /**
   * Receives, for stage `stage`, the gradient of its output `output` of microbatch `mb` from
   * stage `stage + 1`.
   */
  recvBackward(stage: number, mb: number, output: Tensor): Promise<Tensor> {
    const from = stage + 1;
    if (this.#isLocal(from)) return Promise.resolve(this.#take(`B${stage}:${mb}`));
    const grad = zeros(output.shape, { dtype: output.dtype });
    return this.#recv(grad, stage, from, KIND.gradient, mb);
  }

  #take(key: string): Tensor {
    const t = this.#local.get(key);
    if (t === undefined) {
      throw new Error(`pipeline: ${key} was taken before this process's stage produced it`);
    }
    this.#local.delete(key);
    return t;
  }

  /** Waits for every send of the step. */
  async finish(): Promise<void> {
    const sends = this.#sends;
    this.#sends = [];
    await Promise.all(sends);
  }

  /** Drops what a failed step left (its sends' errors are the step's error already). */
  abandon(): void {
    for (const s of this.#sends) s.catch(() => {});
    this.#sends = [];
    for (const t of this.#local.values()) t.dispose();
    this.#local.clear();
  }
}
