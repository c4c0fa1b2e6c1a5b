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
