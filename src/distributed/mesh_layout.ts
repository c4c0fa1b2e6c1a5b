/**
 * The arithmetic of a device mesh: the world's ranks laid out row-major over a shape, as
 * PyTorch's `torch.arange(world).view(shape)`, and the blocks of ranks along a set of its
 * dimensions (one process group each).
 * @module
 */

/** Ranks nested as the mesh's shape (a 1-D mesh is a flat list), as `Tensor.tolist()` has them. */
export type NestedRanks = number[] | NestedRanks[];

/** Row-major strides of `shape`: the rank distance of one step along each dimension. */
export function rowMajorStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let stride = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

/** The coordinates of `rank` in a row-major mesh of `shape`. */
export function coordinateOf(rank: number, shape: readonly number[]): number[] {
  const strides = rowMajorStrides(shape);
  return strides.map((s, d) => Math.floor(rank / s) % shape[d]);
}

/**
 * The ranks of the block along `dims` (root dimensions, ascending) that holds the rank at
 * `coordinate`: every coordinate of `dims`, row-major, the other dimensions fixed.
 */
export function blockRanks(
  shape: readonly number[],
  dims: readonly number[],
  coordinate: readonly number[],
): number[] {
  const strides = rowMajorStrides(shape);
  let base = 0;
  for (let d = 0; d < shape.length; d++) {
    if (!dims.includes(d)) base += coordinate[d] * strides[d];
  }
  let ranks = [base];
  for (const d of dims) {
    const next: number[] = [];
    for (const r of ranks) {
      for (let i = 0; i < shape[d]; i++) next.push(r + i * strides[d]);
    }
    ranks = next;
  }
  return ranks;
}

/**
 * Every block along `dims`, in row-major order of the other dimensions' coordinates: the order
 * in which every rank creates their groups.
 */
export function allBlocks(shape: readonly number[], dims: readonly number[]): number[][] {
  const others = shape.map((_, d) => d).filter((d) => !dims.includes(d));
  const count = others.reduce((n, d) => n * shape[d], 1);
  const blocks: number[][] = [];
  for (let i = 0; i < count; i++) {
    const coordinate = new Array<number>(shape.length).fill(0);
    let rest = i;
    for (let k = others.length - 1; k >= 0; k--) {
      coordinate[others[k]] = rest % shape[others[k]];
      rest = Math.floor(rest / shape[others[k]]);
    }
    blocks.push(blockRanks(shape, dims, coordinate));
  }
  return blocks;
}

/**
 * The sets of dimensions of a mesh of `shape` that get groups, ascending within each set: first
 * each dimension alone (0, 1, ...), then every set of two or more dimensions of size above 1, by
 * its bit mask over those. A dimension of size 1 adds no rank to a set (see {@linkcode groupKey}),
 * so the sets are linear in the number of dimensions: 2^k of them for k dimensions above size 1,
 * and 2^k is at most the mesh's size.
 */
export function dimSets(shape: readonly number[]): number[][] {
  const sets = shape.map((_, d) => [d]);
  const wide = shape.flatMap((n, d) => n > 1 ? [d] : []);
  for (let mask = 1; mask < 2 ** wide.length; mask++) {
    const dims = wide.filter((_, i) => mask & (1 << i));
    if (dims.length > 1) sets.push(dims);
  }
  return sets;
}

/**
 * The key of the group along root dimensions `dims`: its dimensions of size above 1 (those of
 * size 1 add no rank), "" for this rank's group alone.
 */
export function groupKey(shape: readonly number[], dims: readonly number[]): string {
  return dims.filter((d) => shape[d] > 1).join(",");
}

/** `ranks` (row-major) nested as `sizes`. */
export function nestRanks(ranks: readonly number[], sizes: readonly number[]): NestedRanks {
  if (sizes.length <= 1) return [...ranks];
  const step = ranks.length / sizes[0];
  return Array.from(
    { length: sizes[0] },
    (_, i) => nestRanks(ranks.slice(i * step, (i + 1) * step), sizes.slice(1)),
  ) as NestedRanks;
}
