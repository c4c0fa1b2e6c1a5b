/**
 * How activations go forward and gradients backward between stages during a step: handed over
 * in memory between two stages of this process, sent point-to-point to a stage on another rank.
 *
 * [Note: pipeline messages in the sender's order]
 * Point-to-point messages between two ranks match in the order each side posts them (the tag is
 * checked, not matched on), but a rank does not need its peer's messages in the order the peer
 * sends them: under Interleaved1F1B rank 0 sends rank 1 activations of two stages and gradients
 * of a third, interleaved by rank 0's schedule, while rank 1 consumes them by its own. Every rank
 * knows every rank's action list, so each receiver derives the exact sequence a peer sends it
 * and receives in that order, keeping what arrives before it is needed. An activation travels
 * after a small header with its dtype and shape (a receiver cannot know a microbatch's rows); a
 * gradient has the shape of the receiver's own output. Each message's tag (kind, destination
 * stage, microbatch) lets the transport catch a schedule that is not the peer's.
 * @module
 */

import { irecv, isend } from "../../dist/p2p.ts";
import type { ProcessGroup } from "../../dist/process_group.ts";
import { tensor, zeros } from "../../tensor/creation.ts";
import type { FloatDType } from "../../tensor/dtype.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import type { PipelineOrder } from "./actions.ts";

const DTYPES: FloatDType[] = ["f32", "bf16", "f16"];
const HEADER = 8;
const KIND = { header: 0, activation: 1, gradient: 2 } as const;
/** How long a "broken" receive waits for the failed send's diagnosis (dist's takes 1.8 s). */
const EXPLAIN_MS = 3000;

/** A message between ranks: an activation for stage `stage` or a gradient for it. */
interface Message {
  kind: "A" | "G";
  stage: number;
  mb: number;
}
const keyOf = (m: Message) => `${m.kind}${m.stage}:${m.mb}`;

/** The stages' messages of one step, on one rank. */
export class StageExchange {
  #local = new Map<string, Tensor>();
  #arrived = new Map<string, Tensor>();
  #expected = new Map<number, { messages: Message[]; next: number }>();
  #sends: Promise<void>[] = [];
  #resolveFirstSendFailure!: (err: unknown) => void;
  #firstSendFailure = new Promise<unknown>((resolve) => this.#resolveFirstSendFailure = resolve);
  #numStages: number;
  #group: ProcessGroup;
  #outputOf: (stage: number, mb: number) => Tensor;

  /**
   * @param order Every rank's actions (by group rank).
   * @param numStages The pipeline's stages.
   * @param group The pipeline's group.
   * @param outputOf This rank's output of a stage and microbatch, still in flight.
   */
  /** Where received activations go: the stages' device (a gradient goes where its output is). */
  #device: string;
  constructor(
    order: PipelineOrder,
    numStages: number,
    group: ProcessGroup,
    outputOf: (stage: number, mb: number) => Tensor,
    device = "cpu",
  ) {
    this.#device = device;
    this.#numStages = numStages;
    this.#group = group;
    this.#outputOf = outputOf;
    const me = group.rank;
    order.forEach((actions, peer) => {
      if (peer === me) return;
      const messages: Message[] = [];
      for (const a of actions) {
        const to = a.type === "F" ? a.stage + 1 : a.stage - 1;
        if (to < 0 || to >= numStages || this.#groupRankOf(to) !== me) continue;
        messages.push({ kind: a.type === "F" ? "A" : "G", stage: to, mb: a.microbatch });
      }
      this.#expected.set(peer, { messages, next: 0 });
    });
  }

  #groupRankOf(stage: number): number {
    return stage % this.#group.size;
  }

  #tag(kind: number, stage: number, mb: number): number {
    return (mb * this.#numStages + stage) * 3 + kind;
  }

  #send(t: Tensor, stage: number, kind: number, mb: number): void {
    const data = t.contiguous();
    const dst = this.#group.ranks[this.#groupRankOf(stage)];
    const work = isend(data, dst, { group: this.#group, tag: this.#tag(kind, stage, mb) });
    // The tensor must stay alive until its bytes are sent. A failed send is reported by
    // finish() (or by the receive it leaves waiting), not as an unhandled rejection meanwhile.
    const sent = Promise.resolve(work).finally(() => data.dispose());
    sent.catch((err) => this.#resolveFirstSendFailure(err));
    this.#sends.push(sent);
  }

  async #recv(into: Tensor, peer: number, kind: number, stage: number, mb: number) {
    const src = this.#group.ranks[peer];
    await irecv(into, src, { group: this.#group, tag: this.#tag(kind, stage, mb) });
    return into;
  }

  /** Receives `peer`'s messages in its order until `wanted` is among them. */
  async #receiveUntil(peer: number, wanted: Message): Promise<Tensor> {
    const key = keyOf(wanted), queue = this.#expected.get(peer)!;
    while (!this.#arrived.has(key)) {
      const m = queue.messages[queue.next++];
      if (m === undefined) {
        throw new Error(`pipeline: rank ${this.#group.ranks[peer]}'s schedule never sends ${key}`);
      }
      this.#arrived.set(keyOf(m), await this.#receive(peer, m));
    }
    const t = this.#arrived.get(key)!;
    this.#arrived.delete(key);
    return t;
  }

  async #receive(peer: number, m: Message): Promise<Tensor> {
    if (m.kind === "G") {
      const output = this.#outputOf(m.stage, m.mb);
      const grad = zeros(output.shape, { dtype: output.dtype, device: output.device });
      return this.#recv(grad, peer, KIND.gradient, m.stage, m.mb);
    }
    const header = zeros([HEADER], { dtype: "i32", device: this.#device });
    await this.#recv(header, peer, KIND.header, m.stage, m.mb);
    const [dtype, ndim, ...dims] = Array.from(header.toArray());
    header.dispose();
    const into = zeros(dims.slice(0, ndim), { dtype: DTYPES[dtype], device: this.#device });
    return this.#recv(into, peer, KIND.activation, m.stage, m.mb);
  }

  /** Sends stage `stage`'s output of microbatch `mb` to stage `stage + 1`. */
  sendForward(stage: number, mb: number, output: Tensor): void {
    const to = stage + 1;
    if (this.#groupRankOf(to) === this.#group.rank) {
      this.#local.set(keyOf({ kind: "A", stage: to, mb }), output.detach());
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
  recvForward(stage: number, mb: number): Promise<Tensor> {
    const m: Message = { kind: "A", stage, mb }, from = this.#groupRankOf(stage - 1);
    if (from === this.#group.rank) return Promise.resolve(this.#take(keyOf(m)));
    return this.#receiveUntil(from, m);
  }

  /** Sends the gradient of stage `stage`'s input of microbatch `mb` to stage `stage - 1`. */
  sendBackward(stage: number, mb: number, grad: Tensor): void {
    const to = stage - 1;
    if (this.#groupRankOf(to) === this.#group.rank) {
      this.#local.set(keyOf({ kind: "G", stage: to, mb }), grad);
    } else {
      this.#send(grad, to, KIND.gradient, mb);
      grad.dispose();
    }
  }

  /** Receives, for stage `stage`, the gradient of its output of microbatch `mb`. */
  recvBackward(stage: number, mb: number): Promise<Tensor> {
    const m: Message = { kind: "G", stage, mb }, from = this.#groupRankOf(stage + 1);
    if (from === this.#group.rank) return Promise.resolve(this.#take(keyOf(m)));
    return this.#receiveUntil(from, m);
  }

  #take(key: string): Tensor {
    const t = this.#local.get(key);
    if (t === undefined) throw new Error(`pipeline: ${key} is needed before its stage made it`);
    this.#local.delete(key);
    return t;
  }

  /**
   * The error to report for `err`, a failed message of this step. A "broken" error only says
   * that an earlier message of the group failed; when that was one of this step's sends, its own
   * error, diagnosed by the transport (which rank died or hung), says more, and arrives once the
   * diagnosis is done: it is waited for, a little longer than a diagnosis takes.
   */
  async explain(err: unknown): Promise<unknown> {
    if ((err as { code?: string }).code !== "broken") return err;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<null>((resolve) =>
      timer = setTimeout(() => resolve(null), EXPLAIN_MS)
    );
    const earlier = await Promise.race([this.#firstSendFailure, late]);
    clearTimeout(timer);
    return earlier ?? err;
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
    for (const t of [...this.#local.values(), ...this.#arrived.values()]) t.dispose();
    this.#local.clear();
    this.#arrived.clear();
  }
}
