/**
 * Web Workers that encode text chunks with GPT-2's BPE in parallel, for prepare's `--workers`.
 * @module
 */

/** A chunk sent to a worker. */
export interface ChunkRequest {
  /** The chunk's number, echoed in the reply. */
  seq: number;
  /** The text. */
  text: string;
}

/** A worker's answer: the chunk's ids, or why it failed. */
export type ChunkReply = { seq: number; ids: Uint16Array } | { seq: number; error: string };

interface Waiting {
  resolve: (ids: Uint16Array) => void;
  reject: (error: Error) => void;
}

/** A fixed set of workers; each chunk goes to the one with the fewest chunks in flight. */
export class EncoderPool {
  private readonly workers: Worker[] = [];
  private readonly inFlight: number[] = [];
  private readonly waiting = new Map<number, Waiting & { worker: number }>();
  private nextSeq = 0;

  /** @param count The number of workers (at least 1). */
  constructor(count: number) {
    for (let w = 0; w < count; w++) {
      const worker = new Worker(new URL("./_encode_worker.ts", import.meta.url).href, {
        type: "module",
      });
      worker.onmessage = (event: MessageEvent<ChunkReply>) => this.settle(event.data);
      worker.onerror = (event) => {
        event.preventDefault();
        this.failAll(new Error(`prepare: encoding worker ${w} failed: ${event.message}`));
      };
      this.workers.push(worker);
      this.inFlight.push(0);
    }
  }

  /** The number of workers. */
  get size(): number {
    return this.workers.length;
  }

  /**
   * Encodes `text` on the least busy worker.
   *
   * @param text The chunk.
   * @returns Its ids (tiktoken's `encode_ordinary`).
   */
  encode(text: string): Promise<Uint16Array> {
    let worker = 0;
    for (let w = 1; w < this.workers.length; w++) {
      if (this.inFlight[w] < this.inFlight[worker]) worker = w;
    }
    const seq = this.nextSeq++;
    this.inFlight[worker]++;
    return new Promise((resolve, reject) => {
      this.waiting.set(seq, { resolve, reject, worker });
      this.workers[worker].postMessage({ seq, text } satisfies ChunkRequest);
    });
  }

  /** Stops the workers; chunks still in flight are rejected. */
  close(): void {
    for (const worker of this.workers) worker.terminate();
    this.failAll(new Error("prepare: the encoding workers were stopped"));
  }

  private settle(reply: ChunkReply): void {
    const waiting = this.waiting.get(reply.seq);
    if (waiting === undefined) return;
    this.waiting.delete(reply.seq);
    this.inFlight[waiting.worker]--;
    if ("error" in reply) waiting.reject(new Error(`prepare: encoding failed: ${reply.error}`));
    else waiting.resolve(reply.ids);
  }

  private failAll(error: Error): void {
    for (const waiting of this.waiting.values()) waiting.reject(error);
    this.waiting.clear();
  }
}
