/**
 * Reads boxes out of a sharded checkpoint's files into a rank's local tensors: for each local box,
 * every saved box that meets it, its overlap copied (see [Note: boxes] in _boxes.ts). Each file
 * is loaded once, and only when a box in it is needed.
 * @module
 */

import { formatShape, type Tensor } from "../tensor/tensor.ts";
import { copyPart, type Holding, intersect } from "./_boxes.ts";
import { type Index, indexPath } from "./_sharded_index.ts";
import { CheckpointError } from "../safetensors/errors.ts";
import { load } from "../safetensors/safetensors.ts";

/** Copies the parts of a checkpoint's tensors that a rank holds into its tensors. */
export class BoxReader {
  #files = new Map<number, Record<string, Tensor>>();
  #views = new Map<string, Tensor>();
  /**
   * @param dir The checkpoint folder.
   * @param index Its validated index.
   */
  constructor(readonly dir: string, readonly index: Index) {}

  /** Fills `dst` (this rank's tensor of `name`, laid out as `held` says) from the checkpoint. */
  read(name: string, dst: Tensor, held: Holding): void {
    const entry = this.index.tensors[name];
    if (entry === undefined) {
      throw new CheckpointError(indexPath(this.dir), `has no tensor "${name}"`);
    }
    if (formatShape(entry.shape) !== formatShape(held.shape)) {
      throw new CheckpointError(
        indexPath(this.dir),
        `${name} is ${formatShape(entry.shape)}, the model's is ${formatShape(held.shape)}`,
      );
    }
    const target = dst.view(held.localShape);
    try {
      for (const box of held.boxes) {
        for (const piece of entry.pieces) {
          const part = intersect(box, piece);
          if (part === null) continue;
          copyPart(target, box, this.#tensor(piece.file, piece.key, piece.length), piece, part);
        }
      }
    } finally {
      target.dispose();
    }
  }

  /** Tensor `key` of file `file`, checked to be f32 of `shape`. */
  #tensor(file: number, key: string, shape: readonly number[]): Tensor {
    let tensors = this.#files.get(file);
    const path = `${this.dir}/${this.index.files[file]}`;
    if (tensors === undefined) {
      tensors = load(path).tensors;
      this.#files.set(file, tensors);
    }
    const t = tensors[key];
    if (t === undefined) {
      throw new CheckpointError(path, `lacks "${key}", which the index places there`);
    }
    if (t.dtype !== "f32" || t.numel() !== shape.reduce((a, b) => a * b, 1)) {
      throw new CheckpointError(
        path,
        `"${key}" is ${t.dtype} ${formatShape(t.shape)}, the index says f32 ${formatShape(shape)}`,
      );
    }
    if (formatShape(t.shape) === formatShape(shape)) return t;
    // A version-1 file stores 0-d tensors as they are; their box is [1].
    const id = `${file}/${key}`;
    return this.#views.get(id) ?? this.#views.set(id, t.view([...shape])).get(id)!;
  }

  /** Frees every loaded tensor. */
  dispose(): void {
    for (const v of this.#views.values()) v.dispose();
    for (const tensors of this.#files.values()) for (const t of Object.values(tensors)) t.dispose();
  }
}
