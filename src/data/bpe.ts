/**
 * GPT-2's byte-level BPE, encoded fast: the text is cut into pieces by GPT-2's pattern, each
 * distinct piece is merged once and its ids remembered (words repeat massively in real text), and
 * the merge loop works on byte strings. The ids are those of js-tiktoken's `Tiktoken.encode` with
 * the same pattern and ranks, in the same order (tests/data/tokenizer_bpe_test.ts holds them equal).
 * @module
 */

/** The rank table as `js-tiktoken/ranks/gpt2` ships it. */
export interface TiktokenRanks {
  /** Lines `<first char> <offset> <base64 token>...`: the tokens of a line have ranks offset, offset+1, .... */
  bpe_ranks: string;
  /** The special tokens' texts and ids. */
  special_tokens: Record<string, number>;
}

/**
 * Pieces cached before the cache is emptied, so that memory stays bounded on any corpus (about
 * 100 bytes a piece): the most frequent pieces of natural text, which make most of its tokens,
 * come back within a few thousand pieces after each emptying.
 */
const CACHE_LIMIT = 1 << 16;
/** Pieces longer than this (UTF-16 units) are merged every time rather than cached. */
const CACHE_PIECE_LIMIT = 256;

/** A growable list of ids, as uint16 (every GPT-2 id is below 65536). */
export class IdBuffer {
  /** The ids; only the first {@linkcode IdBuffer.length} are meaningful. */
  ids: Uint16Array;
  /** How many ids were pushed. */
  length = 0;

  /** @param capacity The ids held before the first growth. */
  constructor(capacity = 1024) {
    this.ids = new Uint16Array(Math.max(capacity, 16));
  }

  /** Appends `id`. */
  push(id: number): void {
    if (this.length === this.ids.length) this.grow(this.length + 1);
    this.ids[this.length++] = id;
  }

  /** Appends `list`. */
  pushAll(list: Uint16Array): void {
    if (this.length + list.length > this.ids.length) this.grow(this.length + list.length);
    this.ids.set(list, this.length);
    this.length += list.length;
  }

  /** A copy of the ids pushed, in a buffer of their exact size (transferable to a worker). */
  toArray(): Uint16Array {
    return this.ids.slice(0, this.length);
  }

  private grow(least: number): void {
    const next = new Uint16Array(Math.max(least, this.ids.length * 2));
    next.set(this.ids.subarray(0, this.length));
    this.ids = next;
  }
}

/** GPT-2's BPE over a rank table, with a cache of the ids of each piece seen. */
export class BytePairEncoder {
  /** Each token's bytes as a "binary" string (one char per byte, U+0000..U+00FF) to its rank. */
  private readonly ranks = new Map<string, number>();
  /** Each rank's bytes, for decoding. */
  private readonly tokenBytes: Uint8Array[] = [];
  /**
   * A piece of text to its ids: a number for a one-token piece, else the ids as the UTF-16 units
   * of a string (far smaller in V8 than a typed array per piece).
   */
  private readonly cache = new Map<string, number | string>();
  private readonly pattern: RegExp;
  private readonly utf8 = new TextEncoder();

  /**
   * @param table The ranks, as js-tiktoken ships them.
   * @param pattern The pre-tokenizer's regular expression source (flags `gu` are added).
   * @param cacheLimit The pieces remembered before the cache is emptied (bounds its memory).
   */
  constructor(
    table: TiktokenRanks,
    pattern: string,
    private readonly cacheLimit: number = CACHE_LIMIT,
  ) {
    this.pattern = new RegExp(pattern, "gu");
    for (const line of table.bpe_ranks.split("\n")) {
      if (line === "") continue;
      const fields = line.split(" ");
      const offset = Number.parseInt(fields[1], 10);
      for (let i = 2; i < fields.length; i++) {
        // atob gives exactly the "binary" string this table is keyed by.
        const binary = atob(fields[i]);
        const rank = offset + i - 2;
        this.ranks.set(binary, rank);
        const bytes = new Uint8Array(binary.length);
        for (let k = 0; k < binary.length; k++) bytes[k] = binary.charCodeAt(k);
        this.tokenBytes[rank] = bytes;
      }
    }
    for (const [text, id] of Object.entries(table.special_tokens)) {
      this.tokenBytes[id] = this.utf8.encode(text);
    }
  }

  /**
   * Appends the ids of `text` to `out`, every part of it read as plain text (tiktoken's
   * `encode_ordinary`).
   *
   * @param text The text.
   * @param out Where the ids go.
   */
  encodeOrdinaryInto(text: string, out: IdBuffer): void {
    const pieces = text.match(this.pattern);
    if (pieces === null) return;
    const cache = this.cache;
    for (let p = 0; p < pieces.length; p++) {
      const piece = pieces[p];
      const known = cache.get(piece);
      if (known !== undefined) {
        if (typeof known === "number") out.push(known);
        else for (let k = 0; k < known.length; k++) out.push(known.charCodeAt(k));
        continue;
      }
      const ids = this.mergePiece(piece);
      if (piece.length <= CACHE_PIECE_LIMIT) {
        if (cache.size >= this.cacheLimit) cache.clear();
        cache.set(piece, ids.length === 1 ? ids[0] : String.fromCharCode(...ids));
      }
      out.pushAll(ids);
    }
  }

  /**
   * The ids of `text` read as plain text (tiktoken's `encode_ordinary`).
   *
   * @param text The text.
   * @returns The ids.
   */
  encodeOrdinary(text: string): Uint16Array {
    const out = new IdBuffer(text.length >> 2);
    this.encodeOrdinaryInto(text, out);
    return out.toArray();
  }

  /**
   * The ids of `text`, where each special token named in `allowed` is its id and the text
   * between them is encoded as {@linkcode BytePairEncoder.encodeOrdinary} (tiktoken's `encode`
   * with `allowed_special`).
   *
   * @param text The text.
   * @param allowed The special tokens' texts and ids to recognise.
   * @returns The ids.
   */
  encodeWithSpecial(text: string, allowed: ReadonlyMap<string, number>): Uint16Array {
    const out = new IdBuffer(text.length >> 2);
    let start = 0;
    for (;;) {
      let next = -1, found = "";
      for (const special of allowed.keys()) {
        const at = text.indexOf(special, start);
        if (at >= 0 && (next < 0 || at < next)) [next, found] = [at, special];
      }
      if (next < 0) break;
      this.encodeOrdinaryInto(text.slice(start, next), out);
      out.push(allowed.get(found)!);
      start = next + found.length;
    }
    this.encodeOrdinaryInto(text.slice(start), out);
    return out.toArray();
  }

  /**
   * The UTF-8 bytes of `ids` (unknown ids skipped, as js-tiktoken's decode).
   *
   * @param ids Token ids.
   * @returns Their bytes, one after the other.
   */
  decodeBytes(ids: ArrayLike<number>): Uint8Array {
    let length = 0;
    for (let i = 0; i < ids.length; i++) length += this.tokenBytes[ids[i]]?.length ?? 0;
    const bytes = new Uint8Array(length);
    let at = 0;
    for (let i = 0; i < ids.length; i++) {
      const token = this.tokenBytes[ids[i]];
      if (token === undefined) continue;
      bytes.set(token, at);
      at += token.length;
    }
    return bytes;
  }

  /**
   * The ids of one piece: tiktoken's byte-pair merge, which repeatedly joins the adjacent pair
   * whose joined bytes have the lowest rank (the leftmost such pair on a tie) until no pair is a
   * token.
   */
  private mergePiece(piece: string): Uint16Array {
    const utf8 = this.utf8.encode(piece);
    let binary = "";
    for (let i = 0; i < utf8.length; i++) binary += String.fromCharCode(utf8[i]);
    const whole = this.ranks.get(binary);
    if (whole !== undefined) return Uint16Array.of(whole);
    // starts[i] is where part i begins; part i ends where part i+1 begins. pairRanks[i] is the
    // rank of parts i and i+1 joined (Infinity when that is no token).
    const starts: number[] = [];
    for (let i = 0; i <= binary.length; i++) starts.push(i);
    const pairRank = (i: number): number =>
      i + 2 < starts.length
        ? this.ranks.get(binary.slice(starts[i], starts[i + 2])) ?? Infinity
        : Infinity;
    const pairRanks: number[] = [];
    for (let i = 0; i + 1 < starts.length - 1; i++) pairRanks.push(pairRank(i));
    while (pairRanks.length > 0) {
      let best = Infinity, at = -1;
      for (let i = 0; i < pairRanks.length; i++) {
        if (pairRanks[i] < best) [best, at] = [pairRanks[i], i];
      }
      if (at < 0) break;
      starts.splice(at + 1, 1);
      pairRanks.splice(at, 1);
      if (at < pairRanks.length) pairRanks[at] = pairRank(at);
      if (at > 0) pairRanks[at - 1] = pairRank(at - 1);
    }
    const ids = new Uint16Array(starts.length - 1);
    for (let i = 0; i + 1 < starts.length; i++) {
      ids[i] = this.ranks.get(binary.slice(starts[i], starts[i + 1]))!;
    }
    return ids;
  }
}
