/**
 * The global random generator: a seed and a counter. Each draw takes the next stretch of counters,
 * so a run is reproducible from `manualSeed` alone, and its state is two numbers to checkpoint.
 * @module
 */

let seed = 0x5eed_d7a1n;
let offset = 0n;

/**
 * Seeds the generator (PyTorch's `torch.manual_seed`).
 *
 * @param value A non-negative integer seed.
 */
export function manualSeed(value: number | bigint): void {
  const v = BigInt(value);
  if (v < 0n || v >= 1n << 64n) {
    throw new RangeError(`manualSeed: seed ${value} is not a 64-bit unsigned integer`);
  }
  seed = v;
  offset = 0n;
}

/** The current seed. */
export function randomSeed(): bigint {
  return seed;
}

/** Reserves `count` counters and returns the first. */
export function nextRandomOffset(count: number): bigint {
  const start = offset;
  offset += BigInt(count);
  return start;
}

/** The generator's state, for snapshots (PyTorch's `get_rng_state`). */
export function getRngState(): { seed: string; offset: string } {
  return { seed: seed.toString(), offset: offset.toString() };
}

/** Restores a state from {@linkcode getRngState}. */
export function setRngState(state: { seed: string; offset: string }): void {
  seed = BigInt(state.seed);
  offset = BigInt(state.offset);
}

const MASK64 = (1n << 64n) - 1n;

/** splitmix64's finaliser: dt_mix64 of csrc/core/scalar_math.h. */
function mix64(z: bigint): bigint {
  z = (z + 0x9e3779b97f4a7c15n) & MASK64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return z ^ (z >> 31n);
}

/**
 * Throws a RangeError naming `op` unless low and high are integers with 0 < high - low <= maxRange.
 *
 * @param op The caller, for the message.
 * @param low The smallest value drawn.
 * @param high One past the largest value drawn.
 * @param maxRange The widest range the caller draws from.
 */
export function checkRandintBounds(op: string, low: number, high: number, maxRange: number): void {
  for (const [name, v] of [["low", low], ["high", high]] as const) {
    if (typeof v !== "number" || !Number.isSafeInteger(v)) {
      throw new RangeError(`${op}: ${name} must be an integer, got ${v}`);
    }
  }
  if (high <= low) throw new RangeError(`${op}: high ${high} must be above low ${low}`);
  if (high - low > maxRange) {
    throw new RangeError(`${op}: the range [${low}, ${high}) is wider than ${maxRange}`);
  }
}

/**
 * `count` integers uniform in [low, high) as JavaScript numbers, from the global generator: the
 * host twin of the `randint` kernel (the same numbers for the same seed and counters), for draws
 * the host needs, such as token offsets past the int32 range of `randint`'s i32 output.
 *
 * @param low The smallest value drawn (a safe integer).
 * @param high One past the largest value drawn (high - low up to 2^53).
 * @param count How many to draw; they take `count` counters, as `randint` does.
 * @returns The values.
 */
export function randintNumbers(low: number, high: number, count: number): number[] {
  checkRandintBounds("randint", low, high, Number.MAX_SAFE_INTEGER);
  const start = nextRandomOffset(count), range = BigInt(high - low), key = seed;
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++) {
    out[i] = low + Number(mix64(key ^ mix64((start + BigInt(i)) & MASK64)) % range);
  }
  return out;
}
