/**
 * How activations go forward and gradients backward between stages during a step: handed over
 * in memory between two stages of this process, sent point-to-point to a stage on another rank in
 * the time step that produces it ([Note: pipeline time steps] in _timeline.ts).
 *
 * [Note: pipeline messages in two batches]
 * A step's messages move in two batches, each posted in one turn (one NCCL group): first the
 * headers of its activations (dtype and shape, 8 i32: a receiver cannot know a microbatch's rows),
 * then, once the received headers are in, the payloads: the activation or gradient this rank sent
 * and every one it receives. A gradient needs no header: it has the shape of the receiver's own
 * output. So a step waits for the headers it receives (its next batch must not go before its
 * payloads), while a payload is waited for only by the action that needs it. Headers go on the
 * host where the group reaches it (Gloo beside NCCL under "auto"), on the stages' device
 * otherwise, the same on both sides. Each message's tag (kind, destination stage, microbatch)
 * lets the transport catch a schedule that is not the peer's.
 * @module
 */

import { irecv, isend } from "../../distributed/p2p.ts";
import type { ProcessGroup } from "../../distributed/process_group.ts";
import { tensor, zeros } from "../../tensor/creation.ts";
import type { FloatDType } from "../../tensor/dtype.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import type { PipelineAction } from "./actions.ts";
import {
  consumerOf,
  messageFor,
  messageKey,
  messageOf,
  type PipelineTimeline,
  type StageMessage,
} from "./_timeline.ts";

const DTYPES: FloatDType[] = ["f32", "bf16", "f16"];
const HEADER = 8;
const KIND = { header: 0, activation: 1, gradient: 2 } as const;
/** How long a "broken" receive waits for the failed send's diagnosis (dist's takes 1.8 s). */
const EXPLAIN_MS = 3000;

/** A message of this rank's and the group rank on the other side. */
interface Addressed {
  m: StageMessage;
  peer: number;
}

/** A step's batches: the actions whose activations' headers it waits for, and when it is done. */
export interface StepMessages {
  /** The actions that need the activations whose headers the step receives. */
  waitsFor: PipelineAction[];
  /** Settles once the step's payloads are posted (at once without headers to receive). */
  posted: Promise<void>;
}

/** Where the exchange puts what it receives, and how small tensors travel. */
export interface ExchangeDevices {
  /** The stages' device: received activations go there (a gradient goes where its output is). */
  device: string;
  /** Where headers are made: the host if the group reaches it, else the device. */
  headers: string;
}

/** The stages' messages of one step, on one rank. */
export class StageExchange {
  /** Messages for this rank's stages: handed over here, or on their way from another rank. */
  #held = new Map<string, Tensor | Promise<Tensor>>();
  /** What this step's action sends to another rank, until the step's batches. */
  #outbox: (Addressed & { t: Tensor }) | null = null;
  /** By step, the messages other ranks send this rank in it. */
  #incoming = new Map<number, Addressed[]>();
  #sends: Promise<void>[] = [];
  #resolveFirstSendFailure!: (err: unknown) => void;
  #firstSendFailure = new Promise<unknown>((resolve) => this.#resolveFirstSendFailure = resolve);
  #numStages: number;
  #group: ProcessGroup;
  #outputOf: (stage: number, mb: number) => Tensor;
  #devices: ExchangeDevices;

  /**
   * @param timeline Every rank's actions in shared steps.
   * @param numStages The pipeline's stages.
   * @param group The pipeline's group.
   * @param outputOf This rank's output of a stage and microbatch, still in flight.
   * @param devices Where received activations and headers go.
   */
  constructor(
    timeline: PipelineTimeline,
    numStages: number,
    group: ProcessGroup,
    outputOf: (stage: number, mb: number) => Tensor,
    devices: ExchangeDevices,
  ) {
    this.#numStages = numStages;
    this.#group = group;
    this.#outputOf = outputOf;
    this.#devices = devices;
    timeline.actions.forEach((actions, peer) => {
      if (peer === group.rank) return;
      actions.forEach((a, step) => {
        const m = a === null ? null : messageOf(a, numStages);
        if (m === null || this.#groupRankOf(m.stage) !== group.rank) return;
        this.#incoming.set(step, [...(this.#incoming.get(step) ?? []), { m, peer }]);
      });
    });
  }

  #groupRankOf(stage: number): number {
    return stage % this.#group.size;
  }

  #tag(kind: number, m: StageMessage): number {
    return (m.mb * this.#numStages + m.stage) * 3 + kind;
  }

  #send(t: Tensor, peer: number, kind: number, m: StageMessage): void {
    const data = t.contiguous();
    const dst = this.#group.ranks[peer];
    const work = isend(data, dst, { group: this.#group, tag: this.#tag(kind, m) });
    // The tensor must stay alive until its bytes are sent. A failed send is reported by
    // finish() (or by the receive it leaves waiting), not as an unhandled rejection meanwhile.
    const sent = Promise.resolve(work).finally(() => data.dispose());
    sent.catch((err) => this.#resolveFirstSendFailure(err));
    this.#sends.push(sent);
  }

  #recv(into: Tensor, peer: number, kind: number, m: StageMessage): Promise<void> {
    const src = this.#group.ranks[peer];
    return Promise.resolve(irecv(into, src, { group: this.#group, tag: this.#tag(kind, m) }));
  }

  /**
   * Keeps what `a` produced (its output, or its input's gradient) for the stage it goes to: here
   * when this rank holds that stage, else sent in this step's batches.
   */
  give(a: PipelineAction, t: Tensor): void {
    const m = messageOf(a, this.#numStages)!, peer = this.#groupRankOf(m.stage);
    if (peer === this.#group.rank) {
      this.#held.set(messageKey(m), t);
      return;
    }
    if (m.kind === "A" && (!DTYPES.includes(t.dtype as FloatDType) || t.ndim > HEADER - 2)) {
      throw new TypeError(
        `pipeline stage ${a.stage}: an activation must be f32, bf16 or f16 with at most ` +
          `${HEADER - 2} dimensions, got ${t.dtype} [${t.shape}]`,
      );
    }
    if (this.#outbox !== null) throw new Error(`pipeline: two messages in one step (${m.kind})`);
    this.#outbox = { m, peer, t };
  }

  /** The message `a` needs: handed over here, or received once it is in. */
  take(a: PipelineAction): Promise<Tensor> {
    const key = messageKey(messageFor(a, this.#numStages)!), t = this.#held.get(key);
    if (t === undefined) throw new Error(`pipeline: ${key} is needed before a step brought it`);
    this.#held.delete(key);
    return Promise.resolve(t);
  }

  /**
   * Sends what this step's action gave and receives what the other ranks send this rank in the
   * step, in two batches ([Note: pipeline messages in two batches]); each payload received is
   * there for {@linkcode take} once it is in.
   */
  communicate(step: number): StepMessages {
    const out = this.#outbox, incoming = this.#incoming.get(step) ?? [];
    this.#outbox = null;
    if (out === null && incoming.length === 0) return { waitsFor: [], posted: Promise.resolve() };
    const { headers: headerDevice, device } = this.#devices;
    if (out?.m.kind === "A") {
      const { dtype, ndim, shape } = out.t;
      const fields = Int32Array.from(
        { length: HEADER },
        (_, i) =>
          i === 0 ? DTYPES.indexOf(dtype as FloatDType) : i === 1 ? ndim : shape[i - 2] ?? 0,
      );
      this.#send(
        tensor(fields, [HEADER], { dtype: "i32", device: headerDevice }),
        out.peer,
        KIND.header,
        out.m,
      );
    }
    const headers = new Map<Addressed, Tensor>();
    for (const r of incoming) {
      if (r.m.kind === "A") headers.set(r, zeros([HEADER], { dtype: "i32", device: headerDevice }));
    }
    const headersIn = [...headers].map(([r, h]) => this.#recv(h, r.peer, KIND.header, r.m));
    const payloads = () => {
      if (out !== null) {
        this.#send(out.t, out.peer, out.m.kind === "A" ? KIND.activation : KIND.gradient, out.m);
        out.t.dispose();
      }
      for (const r of incoming) {
        const header = headers.get(r);
        let into: Tensor;
        if (header === undefined) {
          const output = this.#outputOf(r.m.stage, r.m.mb);
          into = zeros(output.shape, { dtype: output.dtype, device: output.device });
        } else {
          const [dtype, ndim, ...dims] = Array.from(header.toArray());
          header.dispose();
          into = zeros(dims.slice(0, ndim), { dtype: DTYPES[dtype], device });
        }
        const kind = r.m.kind === "A" ? KIND.activation : KIND.gradient;
        const arrived = this.#recv(into, r.peer, kind, r.m).then(() => into, (err) => {
          into.dispose();
          throw err;
        });
        arrived.catch(() => {}); // its error is the consumer's (take), or the step's already
        this.#held.set(messageKey(r.m), arrived);
      }
    };
    const waitsFor = [...headers.keys()].map((r) => consumerOf(r.m));
    // Without a header to wait for, the payloads go in the same turn.
    if (headersIn.length === 0) return { waitsFor, posted: Promise.resolve(payloads()) };
    const posted = Promise.all(headersIn).then(payloads, (err) => {
      for (const h of headers.values()) h.dispose();
      out?.t.dispose();
      throw err;
    });
    return { waitsFor, posted };
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
    this.#outbox?.t.dispose();
    this.#outbox = null;
    for (const t of this.#held.values()) {
      Promise.resolve(t).then((t) => t.dispose(), () => {});
    }
    this.#held.clear();
  }
}
