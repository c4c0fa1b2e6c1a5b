/**
 * `DataLoader`: batches of a dataset in a sampler's order, each field collated into one contiguous
 * native tensor: by the dataset's own `getBatch` when it has one, else by copying each sample into
 * a preallocated batch tensor. With `pinMemory`, batches go on to a GPU through page-locked host
 * memory, asynchronously (see [Note: pinned batch ring] in csrc/cuda/pinned.cu).
 * @module
 */

import {
  DEFAULT_ACCELERATOR,
  DEFAULT_DEVICE,
  type DeviceBackend,
  deviceName,
  FAMILIES,
  familyOf,
  getDevice,
} from "../tensor/device/mod.ts";
import { tidy } from "../tensor/scope.ts";
import type { Device } from "../tensor/storage.ts";
import { copyInto, formatShape, sameShape, shapeSize, Tensor } from "../tensor/tensor.ts";
import type { Dataset, Sample } from "./dataset.ts";
import { RandomSampler, type Sampler, SequentialSampler } from "./sampler.ts";

/** Options of {@linkcode DataLoader}. */
export interface DataLoaderOptions {
  /** Samples per batch. Default 1. */
  batchSize?: number;
  /** Visit the samples in a new random order each epoch. Excludes `sampler`. Default false. */
  shuffle?: boolean;
  /** Drop the last batch when it is smaller than `batchSize`. Default false. */
  dropLast?: boolean;
  /** The order of the indices (such as a `DistributedSampler`). Excludes `shuffle`. */
  sampler?: Sampler;
  /** Seed of the shuffled orders (with `shuffle`). Default 0. */
  seed?: number;
  /**
   * Copy each batch to the accelerator `device` through page-locked host memory, asynchronously:
   * PyTorch's `pin_memory=True` with the `.to(device, non_blocking=True)` done by the loader, so
   * batches arrive on the device (a GPU, or the emulated `emu`). The default device needs CUDA:
   * where it is unavailable the constructor throws, naming the reason (PyTorch warns and yields
   * CPU batches instead; a loader asked for GPU batches does not hand back CPU ones here). Default
   * false.
   */
  pinMemory?: boolean;
  /**
   * Where batches are yielded: `"cpu"`, or an accelerator (`"cuda"`, `"cuda:N"`, `"emu:N"`),
   * reached through pinned memory with `pinMemory` and by `Tensor.to` without. Default `"cuda:0"`
   * with `pinMemory`, else `"cpu"`.
   */
  device?: Device;
}

/**
 * Iterates a dataset in batches (PyTorch's `torch.utils.data.DataLoader`, in-process): each step
 * yields one tensor per sample field, with the batch as the first dimension. Batches are ordinary
 * tensors that the caller may `dispose()`.
 *
 * @example One epoch
 * ```ts
 * import assert from "node:assert/strict";
 * import { DataLoader, SyntheticRegression } from "./mod.ts";
 * const loader = new DataLoader(new SyntheticRegression({ size: 100 }), {
 *   batchSize: 32,
 *   shuffle: true,
 *   seed: 1,
 * });
 * assert.equal(loader.length, 4);
 * loader.setEpoch(0);
 * const sizes: number[] = [];
 * for (const [x, y] of loader) {
 *   sizes.push(x.shape[0]);
 *   x.dispose();
 *   y.dispose();
 * }
 * assert.deepEqual(sizes, [32, 32, 32, 4]);
 * ```
 */
export class DataLoader<T extends Sample = Sample> implements Iterable<Tensor[]> {
  /** The dataset read. */
  readonly dataset: Dataset<T>;
  /** Samples per batch. */
  readonly batchSize: number;
  /** Whether a smaller last batch is dropped. */
  readonly dropLast: boolean;
  /** The order of the indices. */
  readonly sampler: Sampler;
  /** Whether batches reach their GPU through page-locked host memory. */
  readonly pinMemory: boolean;
  /** Where batches are yielded (`"cpu"`, `"cuda:0"`). */
  readonly device: Device;
  #backend: DeviceBackend;

  /**
   * Creates a `DataLoader`.
   *
   * @param dataset The dataset.
   * @param options batchSize, shuffle, dropLast, sampler, seed, pinMemory and device.
   * @throws Error naming the reason when `pinMemory` is set where CUDA is unavailable.
   */
  constructor(dataset: Dataset<T>, options: DataLoaderOptions = {}) {
    const { batchSize = 1, shuffle = false, dropLast = false, sampler, seed } = options;
    const { pinMemory = false } = options;
    if (typeof pinMemory !== "boolean") {
      throw new TypeError(`DataLoader: pinMemory must be true or false, got ${String(pinMemory)}`);
    }
    const device = options.device ??
      (pinMemory ? deviceName(DEFAULT_ACCELERATOR, 0) : DEFAULT_DEVICE);
    // An unknown or unusable device throws its reason; with pinMemory, its family's.
    let backend: DeviceBackend;
    try {
      backend = getDevice(device);
    } catch (err) {
      const family = familyOf(device);
      if (!pinMemory || family === null || FAMILIES[family].isAvailable()) throw err;
      const { title, unavailableReason } = FAMILIES[family];
      throw new Error(
        `DataLoader: pinMemory needs ${title}, which is not available: ${unavailableReason()} ` +
          `(leave pinMemory off, or pass pinMemory: ${family}.isAvailable())`,
      );
    }
    if (pinMemory && backend.isHostMemory) {
      throw new RangeError(
        `DataLoader: pinMemory copies batches to a GPU, but device is "${device}" ` +
          "(leave pinMemory off for batches in host memory)",
      );
    }
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
      throw new RangeError(`DataLoader: batchSize ${batchSize} is not a positive integer`);
    }
    if (sampler !== undefined && shuffle) {
      throw new Error("DataLoader: sampler option is mutually exclusive with shuffle");
    }
    if (sampler !== undefined && seed !== undefined) {
      throw new Error("DataLoader: seed applies to shuffle; seed the sampler instead");
    }
    this.dataset = dataset;
    this.batchSize = batchSize;
    this.dropLast = dropLast;
    this.sampler = sampler ??
      (shuffle ? new RandomSampler(dataset, { seed }) : new SequentialSampler(dataset));
    this.pinMemory = pinMemory;
    this.device = backend.name; // canonical, as tensors carry it ("cuda" is "cuda:0")
    this.#backend = backend;
  }

  /** The number of batches per epoch. */
  get length(): number {
    const n = this.sampler.length;
    return this.dropLast ? Math.floor(n / this.batchSize) : Math.ceil(n / this.batchSize);
  }

  /** Chooses the epoch whose order the next pass uses (forwarded to samplers that shuffle). */
  setEpoch(epoch: number): void {
    this.sampler.setEpoch?.(epoch);
  }

  /** Yields the epoch's batches, one tensor per sample field. */
  *[Symbol.iterator](): Iterator<Tensor[]> {
    let batch = new Int32Array(this.batchSize);
    let n = 0;
    for (const index of this.sampler) {
      batch[n++] = index;
      if (n === this.batchSize) {
        yield this.#place(this.collate(batch));
        batch = new Int32Array(this.batchSize);
        n = 0;
      }
    }
    if (n > 0 && !this.dropLast) yield this.#place(this.collate(batch.subarray(0, n)));
  }

  /**
   * A collated batch on the loader's device: as is when it is there already; with `pinMemory`,
   * each field in host memory copied in one `copyInAsync` call (through the GPU's pinned ring: the
   * copies run on while the next batch is collated); else moved with `to`. The host fields are
   * disposed.
   */
  #place(batch: Tensor[]): Tensor[] {
    if (batch.every((t) => t.device === this.device)) return batch;
    if (!this.pinMemory) return batch.map((t) => moveTo(t, this.device));
    const sources = batch.map((t) => t.storage.backend.isHostMemory ? t.contiguous() : null);
    const placed = batch.map((t, i) =>
      sources[i] ? Tensor.empty(t.shape, t.dtype, false, this.device) : moveTo(t, this.device)
    );
    try {
      this.#backend.copyInAsync(
        placed.flatMap((dst, i) => {
          const src = sources[i];
          return src ? [{ dst: dst.ptr, src: src.ptr, nbytes: dst.storage.nbytes }] : [];
        }),
      );
    } catch (err) {
      placed.forEach((t) => t.dispose());
      throw err;
    }
    sources.forEach((src, i) => {
      if (src === null) return;
      src.dispose();
      batch[i].dispose();
    });
    return placed;
  }

  /**
   * The samples at `indices` as one batch: the dataset's `getBatch` when it has one, else every
   * `get(i)` field copied into a new `[indices.length, ...]` tensor. Sample tensors that `get`
   * made for the call are disposed after copying; tensors the dataset stores (made before) are
   * left alone (a dataset that caches what `get` makes should `keep()` it).
   *
   * @param indices Dataset indices.
   * @returns One tensor per sample field.
   */
  collate(indices: Int32Array): Tensor[] {
    if (this.dataset.getBatch) return this.dataset.getBatch(indices);
    // The scope frees exactly the tensors made while collating, but the batch it returns.
    return tidy(() => {
      let batch: Tensor[] = [];
      indices.forEach((index, i) => {
        const sample = this.dataset.get(index);
        const fields: readonly Tensor[] = sample instanceof Tensor ? [sample] : sample;
        if (i === 0) batch = fields.map((f) => Tensor.empty([indices.length, ...f.shape], f.dtype));
        if (fields.length !== batch.length) {
          throw new RangeError(
            `DataLoader: sample ${index} has ${fields.length} fields, sample ${indices[0]} had ` +
              batch.length,
          );
        }
        fields.forEach((field, f) => copyRow(batch[f], i, field, `sample ${index} field ${f}`));
      });
      return batch;
    });
  }
}

/** `t` on `device` (a copy, or a view when it is there already); `t` itself is disposed. */
function moveTo(t: Tensor, device: Device): Tensor {
  const moved = t.to(device);
  t.dispose();
  return moved;
}

/** Copies `src` into row `row` of contiguous `dst`, checking shape and dtype. */
function copyRow(dst: Tensor, row: number, src: Tensor, what: string): void {
  const rowShape = dst.shape.slice(1);
  if (src.dtype !== dst.dtype || !sameShape(src.shape, rowShape)) {
    throw new RangeError(
      `DataLoader: ${what} is ${src.dtype} ${formatShape(src.shape)}, earlier samples were ` +
        `${dst.dtype} ${formatShape(rowShape)} (collation stacks equal shapes)`,
    );
  }
  const rowSize = shapeSize(rowShape);
  if (rowSize === 0) return;
  const view = new Tensor(dst.storage, rowShape, dst.dtype, undefined, row * rowSize);
  copyInto(view, src);
  view.dispose();
}
