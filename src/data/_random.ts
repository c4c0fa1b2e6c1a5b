/**
 * Seeded permutations for the samplers: Fisher–Yates driven by splitmix64, written with 32-bit
 * integer arithmetic only, so every process (and every machine) draws the same order from the same
 * seed without BigInt.
 * @module
 */

const TWO_32 = 0x1_0000_0000;

/** The low and high 32 bits of the 64-bit product of two unsigned 32-bit integers. */
function mulWide(a: number, b: number): [lo: number, hi: number] {
  const a0 = a & 0xffff, a1 = a >>> 16, b0 = b & 0xffff, b1 = b >>> 16;
  const p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  const lo = (((mid & 0xffff) << 16) | (p00 & 0xffff)) >>> 0;
  const hi = (p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16)) >>> 0;
  return [lo, hi];
}

/** splitmix64 (Steele, Lea and Flood), the 64-bit state kept as two unsigned 32-bit halves. */
export class SplitMix64 {
  #lo: number;
  #hi: number;

  /** @param seed A non-negative safe integer. */
  constructor(seed: number) {
    checkSeed("SplitMix64", seed);
    this.#lo = seed % TWO_32;
    this.#hi = Math.floor(seed / TWO_32);
  }

  /** The next 64-bit output as [low 32 bits, high 32 bits], both unsigned. */
  next(): [lo: number, hi: number] {
    // state += 0x9E3779B97F4A7C15
    const sum = this.#lo + 0x7f4a7c15;
    this.#lo = sum >>> 0;
    this.#hi = (this.#hi + 0x9e3779b9 + (sum >= TWO_32 ? 1 : 0)) >>> 0;
    let lo = this.#lo, hi = this.#hi;
    [lo, hi] = mix(lo, hi, 30, 0x1ce4e5b9, 0xbf58476d);
    [lo, hi] = mix(lo, hi, 27, 0x133111eb, 0x94d049bb);
    return [(lo ^ ((lo >>> 31) | (hi << 1))) >>> 0, (hi ^ (hi >>> 31)) >>> 0];
  }

  /** A uniform integer in [0, n) for 1 <= n <= 2^32, without modulo bias (rejection sampling). */
  below(n: number): number {
    const limit = TWO_32 - (TWO_32 % n);
    for (;;) {
      const x = this.next()[1];
      if (x < limit) return x % n;
    }
  }
}

/** z ^= z >>> shift (shift < 32), then z *= (mulHi, mulLo), modulo 2^64. */
function mix(
  lo: number,
  hi: number,
  shift: number,
  mulLo: number,
  mulHi: number,
): [number, number] {
  const xLo = (lo ^ ((lo >>> shift) | (hi << (32 - shift)))) >>> 0;
  const xHi = (hi ^ (hi >>> shift)) >>> 0;
  const [pLo, pHi] = mulWide(xLo, mulLo);
  return [pLo, (pHi + Math.imul(xLo, mulHi) + Math.imul(xHi, mulLo)) >>> 0];
}

/**
 * Throws a RangeError naming `what` unless `seed` is a non-negative safe integer.
 *
 * @param what The caller, for the message.
 * @param seed The seed to check.
 */
export function checkSeed(what: string, seed: number): void {
  if (!Number.isSafeInteger(seed) || seed < 0) {
    throw new RangeError(`${what}: seed ${seed} is not a non-negative safe integer`);
  }
}

/**
 * A permutation of 0..n-1, the same for the same `seed` on every process (Fisher–Yates).
 *
 * @param n The number of indices.
 * @param seed The generator's seed (samplers pass seed + epoch, like PyTorch).
 * @returns The shuffled indices.
 */
export function permutation(n: number, seed: number): Int32Array {
  const rng = new SplitMix64(seed);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = rng.below(i + 1);
    const t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
  return out;
}
