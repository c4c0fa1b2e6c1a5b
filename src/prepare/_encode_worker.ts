/**
 * A Web Worker of prepare's {@linkcode EncoderPool}: encodes the chunks it is sent with GPT-2's
 * BPE (as tiktoken's `encode_ordinary`) and sends back their ids, tagged with the chunk's number.
 * @module
 */

import { gpt2Encoder } from "../data/_gpt2_bpe.ts";
import { IdBuffer } from "../data/bpe.ts";
import type { ChunkReply, ChunkRequest } from "./_pool.ts";

/** The worker's global scope, as far as this module uses it (the project's lib is the window's). */
const scope = self as unknown as {
  onmessage: ((event: MessageEvent<ChunkRequest>) => void) | null;
  postMessage(message: ChunkReply, transfer?: Transferable[]): void;
};

const encoder = gpt2Encoder();
/** One buffer for every chunk, so that encoding leaves no grown buffers behind for the GC. */
const buffer = new IdBuffer(1 << 18);

scope.onmessage = async (event: MessageEvent<ChunkRequest>) => {
  const { seq, text } = event.data;
  try {
    buffer.length = 0;
    (await encoder).encodeOrdinaryInto(text, buffer);
    const ids = buffer.toArray();
    scope.postMessage({ seq, ids } satisfies ChunkReply, [ids.buffer as ArrayBuffer]);
  } catch (error) {
    scope.postMessage(
      { seq, error: String((error as Error)?.stack ?? error) } satisfies ChunkReply,
    );
  }
};
