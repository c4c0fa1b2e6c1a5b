/**
 * Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017) read from Debian's `dataset-fashion-mnist`
 * package. The images stay as one byte array; batches are gathered and converted to floats by the
 * native kernel straight into the batch tensor.
 * @module
 */

import { join } from "node:path";
import { Tensor } from "../tensor/tensor.ts";
import { checkIndex, type Dataset } from "./dataset.ts";
import { IDX_IMAGES, IDX_LABELS, type IdxArray, readIdx } from "./idx.ts";

/** Where Debian's `dataset-fashion-mnist` installs the files. */
export const FASHION_MNIST_ROOT = "/usr/share/datasets/fashion-mnist";

const INSTALL_HINT =
  "install or reinstall it with `apt-get install dataset-fashion-mnist`, or pass another root";
const SIDE = 28;
const CLASSES = 10;

/** Options of {@linkcode FashionMNIST}. */
export interface FashionMNISTOptions {
  /** The folder holding the four `.gz` files. Default `/usr/share/datasets/fashion-mnist`. */
  root?: string;
  /** The 60000 training samples (default), or the 10000 test samples when false. */
  train?: boolean;
  /** Normalises pixels after scaling to [0, 1]: (x - mean) / std, like torchvision's `Normalize`. */
  normalize?: { mean: number; std: number };
}

/**
 * Fashion-MNIST: 28x28 grey images of clothes in 10 classes (torchvision's `FashionMNIST` with
 * `ToTensor()`, and `Normalize` when asked, images flattened).
 *
 * `get(i)` is `[image f32 [784], label i32 []]`; `getBatch` gives `[images f32 [B, 784], labels
 * i32 [B]]`, pixels scaled to [0, 1] (then normalised when `normalize` is set).
 *
 * @example One batch of the test split
 * ```ts
 * import assert from "node:assert/strict";
 * import { DataLoader, FashionMNIST } from "./mod.ts";
 * const test = new FashionMNIST({ train: false, normalize: { mean: 0.2860, std: 0.3530 } });
 * const [x, y] = new DataLoader(test, { batchSize: 64 })[Symbol.iterator]().next().value!;
 * assert.deepEqual(x.shape, [64, 784]);
 * assert.deepEqual(y.shape, [64]);
 * ```
 */
export class FashionMNIST implements Dataset<[Tensor, Tensor]> {
  /** The class names, by label. */
  static readonly classes: readonly string[] = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
  ];
  /** The folder the files were read from. */
  readonly root: string;
  /** Whether this is the training split. */
  readonly train: boolean;
  /** The pixels, image after image, 784 bytes each. */
  readonly images: Uint8Array;
  /** The labels, one byte per image. */
  readonly labels: Uint8Array;
  readonly #scale: number;
  readonly #shift: number;

  /**
   * Creates a `FashionMNIST`.
   *
   * @param options root, train and normalize.
   */
  constructor(options: FashionMNISTOptions = {}) {
    this.root = options.root ?? FASHION_MNIST_ROOT;
    this.train = options.train ?? true;
    const { mean = 0, std = 1 } = options.normalize ?? {};
    if (!Number.isFinite(mean) || !(std > 0) || !Number.isFinite(std)) {
      throw new RangeError(
        `FashionMNIST: normalize needs a finite mean and a positive std, got mean ${mean}, std ${std}`,
      );
    }
    this.#scale = 1 / (255 * std);
    this.#shift = -mean / std;
    const split = this.train ? "train" : "t10k";
    const imagesPath = join(this.root, `${split}-images-idx3-ubyte.gz`);
    const labelsPath = join(this.root, `${split}-labels-idx1-ubyte.gz`);
    const images = read(imagesPath, IDX_IMAGES), labels = read(labelsPath, IDX_LABELS);
    const [count, rows, cols] = images.dims;
    if (rows !== SIDE || cols !== SIDE) {
      fail(`${imagesPath}: images are ${rows}x${cols}, Fashion-MNIST's are ${SIDE}x${SIDE}`);
    }
    if (labels.dims[0] !== count) {
      fail(
        `${labelsPath} holds ${labels.dims[0]} labels but ${imagesPath} holds ${count} images`,
      );
    }
    const bad = labels.data.findIndex((label) => label >= CLASSES);
    if (bad >= 0) {
      fail(`${labelsPath}: label ${labels.data[bad]} at index ${bad} is not in [0, ${CLASSES})`);
    }
    this.images = images.data;
    this.labels = labels.data;
  }

  /** The number of samples (60000 for train, 10000 for test). */
  get length(): number {
    return this.labels.length;
  }

  /** Sample `index`: `[image f32 [784], label i32 []]`. */
  get(index: number): [Tensor, Tensor] {
    checkIndex("FashionMNIST", index, this.length);
    const indices = Int32Array.of(index);
    return [this.#gather(indices, [SIDE * SIDE]), this.#gatherLabels(indices, [])];
  }

  /** The samples at `indices`: `[images f32 [B, 784], labels i32 [B]]`. */
  getBatch(indices: Int32Array): Tensor[] {
    const n = indices.length;
    return [this.#gather(indices, [n, SIDE * SIDE]), this.#gatherLabels(indices, [n])];
  }

  #gather(indices: Int32Array, shape: number[]): Tensor {
    const out = Tensor.empty(shape, "f32");
    if (indices.length > 0) {
      const dev = out.storage.backend;
      dev.check(dev.kernels.gatherU8F32(
        Deno.UnsafePointer.of(this.images),
        this.length,
        Deno.UnsafePointer.of(indices),
        indices.length,
        SIDE * SIDE,
        this.#scale,
        this.#shift,
        out.ptr,
      ));
    }
    return out;
  }

  #gatherLabels(indices: Int32Array, shape: number[]): Tensor {
    const out = Tensor.empty(shape, "i32");
    if (indices.length > 0) {
      const dev = out.storage.backend;
      dev.check(dev.kernels.gatherU8I32(
        Deno.UnsafePointer.of(this.labels),
        this.length,
        Deno.UnsafePointer.of(indices),
        indices.length,
        out.ptr,
      ));
    }
    return out;
  }
}

/** Reads an IDX file, adding the package to install to any error. */
function read(path: string, magic: number): IdxArray {
  try {
    return readIdx(path, magic);
  } catch (cause) {
    return fail((cause as Error).message, cause);
  }
}

function fail(message: string, cause?: unknown): never {
  throw new Error(`FashionMNIST: ${message}; ${INSTALL_HINT}`, { cause });
}
