/**
 * Prepare's streaming encoder: text arrives in blocks, is cut into chunks at safe boundaries
 * (src/prepare/_split.ts), the chunks are encoded (on the main thread or by workers, several at a
 * time) and their ids are written to the token files in the order of the text.
 * @module
 */

import { writeAll } from "../io/write_all.ts";

/** A write that failed; prepare names the folder and file. */
export class WriteError extends Error {
  /**
   * @param file The output's name (`train.bin`).
   * @param cause What the file system said.
   */
  constructor(readonly file: string, override readonly cause: Error) {
    super(cause.message);
    this.name = "WriteError";
  }
}

/** A uint16 token file being written. */
export class TokenWriter {
  /** The ids written so far. */
  tokens = 0;
  private readonly file: Deno.FsFile;

  /**
   * @param name The output's name, for errors.
   * @param path Where to write (created or truncated).
   */
  constructor(readonly name: string, path: string) {
    try {
      this.file = Deno.openSync(path, { write: true, create: true, truncate: true });
    } catch (error) {
      throw new WriteError(name, error as Error);
    }
  }

  /** Appends `ids` as uint16 in the platform's order (every platform Deno runs on is little-endian). */
  write(ids: Uint16Array): void {
    try {
      writeAll(this.file, new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength));
    } catch (error) {
      throw new WriteError(this.name, error as Error);
    }
    this.tokens += ids.length;
  }

  /** Closes the file. */
  close(): void {
    this.file.close();
  }
}

/**
 * Where a chunk of `text` may end at or after `from`, or -1 when it must wait for more text.
 */
export type Boundary = (text: string, from: number) => number;

/** Encodes the text given to it chunk by chunk, writing ids in the text's order. */
export class ChunkEncoder {
  private pending = "";
  private pendingOut: TokenWriter | undefined;
  /** Where the search for a boundary resumes in `pending` (text before it has none). */
  private searched = 0;
  private readonly queue: { ids: Promise<Uint16Array> | Uint16Array; out: TokenWriter }[] = [];

  /**
   * @param encode The ids of a chunk.
   * @param boundary Where chunks may end.
   * @param chunkChars The least chunk length (UTF-16 units).
   * @param inFlight The chunks encoded at once before the oldest is waited for.
   */
  constructor(
    private readonly encode: (text: string) => Promise<Uint16Array> | Uint16Array,
    private readonly boundary: Boundary,
    private readonly chunkChars: number,
    private readonly inFlight: number,
  ) {}

  /**
   * Adds `text`, which follows the text added before, to the part written to `out`.
   *
   * @param text The text.
   * @param out The token file of this part.
   */
  async add(text: string, out: TokenWriter): Promise<void> {
    if (this.pendingOut !== undefined && this.pendingOut !== out) await this.flush();
    this.pendingOut = out;
    this.pending += text;
    while (this.pending.length >= this.chunkChars) {
      const at = this.boundary(this.pending, Math.max(this.chunkChars, this.searched));
      if (at < 0) {
        this.searched = this.pending.length;
        return;
      }
      const chunk = this.pending.slice(0, at);
      this.pending = this.pending.slice(at);
      this.searched = 0;
      await this.submit(this.encode(chunk), out);
    }
  }

  /** Ends the current part: its text left is encoded as one chunk (a part's end is always safe). */
  async flush(): Promise<void> {
    const out = this.pendingOut;
    if (out !== undefined && this.pending.length > 0) {
      const chunk = this.pending;
      this.pending = "";
      this.searched = 0;
      await this.submit(this.encode(chunk), out);
    }
    this.pendingOut = undefined;
  }

  /**
   * Writes `ids` to `out` after everything added before (an end-of-text id after a file).
   *
   * @param ids The ids.
   * @param out The token file.
   */
  async addIds(ids: Uint16Array, out: TokenWriter): Promise<void> {
    await this.flush();
    await this.submit(ids, out);
  }

  /** Waits for every chunk in flight and writes it. */
  async drain(): Promise<void> {
    await this.flush();
    while (this.queue.length > 0) await this.writeOldest();
  }

  private async submit(ids: Promise<Uint16Array> | Uint16Array, out: TokenWriter): Promise<void> {
    // A chunk that fails while an older one is awaited is reported when its turn comes, not as
    // an unhandled rejection.
    if (ids instanceof Promise) ids.catch(() => {});
    this.queue.push({ ids, out });
    while (this.queue.length > this.inFlight) await this.writeOldest();
  }

  private async writeOldest(): Promise<void> {
    const { ids, out } = this.queue.shift()!;
    out.write(await ids);
  }
}
