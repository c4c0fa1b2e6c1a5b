/**
 * Reads boxes out of a sharded checkpoint's files into a rank's local tensors: for each local box,
 * every saved box that meets it, its overlap copied (see [Note: boxes] in _boxes.ts). Files are
 * opened once, when a box in them is first needed, and read piece by piece: an overlap that is a
 * run of whole rows in both the file and the tensor (every load onto the layout it was saved
 * from, and FSDP's row shards on any world size) is read straight into the tensor; any other is
 * read (only the rows it spans) into a temporary and copied. No second copy of the state is held.
 * @module
 */

import { formatShape, Tensor } from "../tensor/tensor.ts";
import { type Box, copyPart, type Holding, intersect, type LocalBox, volume } from "./_boxes.ts";
import { type Index, indexPath, type SavedBox } from "./_sharded_index.ts";
import { CheckpointError } from "../safetensors/errors.ts";
import { TensorFile } from "../safetensors/_tensor_file.ts";
import type { TensorEntry } from "../safetensors/_header.ts";

const F32_BYTES = 4;

/** Copies the parts of a checkpoint's tensors that a rank holds into its tensors. */
export class BoxReader {
  #files = new Map<number, TensorFile>();
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
          if (part !== null) this.#copy(target, box, piece, part);
        }
      }
    } finally {
      target.dispose();
    }
  }

  /** Copies `part`, the overlap of saved box `piece` with `target`'s box `box`, into `target`. */
  #copy(target: Tensor, box: LocalBox, piece: SavedBox, part: Box): void {
    const { file, stored } = this.#stored(piece);
    // Elements per row of the part: every dimension after the first.
    const rowElements = volume({ start: [], length: part.length.slice(1) });
    const fromRow = part.start[0] - piece.start[0], rows = part.length[0];
    const fileOffset = fromRow * rowElements * F32_BYTES, nbytes = rows * rowElements * F32_BYTES;
    const wholeRows = part.length.every((n, d) =>
      d === 0 || (n === piece.length[d] && n === target.shape[d] && box.at[d] === 0)
    );
    if (
      wholeRows && target.dtype === "f32" && target.isContiguous() &&
      target.storage.backend.isHostMemory
    ) {
      const into = target.narrow(0, part.start[0] - box.start[0] + box.at[0], rows);
      try {
        if (nbytes > 0) file.readInto(stored, fileOffset, into.ptr!, nbytes);
      } finally {
        into.dispose();
      }
      return;
    }
    // The rows of the piece that the part spans, whole: one run of the file.
    const spanLength = [rows, ...piece.length.slice(1)];
    const span = Tensor.empty(spanLength, "f32");
    try {
      const spanBytes = volume({ start: [], length: spanLength }) * F32_BYTES;
      if (spanBytes > 0) {
        file.readInto(stored, fromRow * (spanBytes / rows), span.ptr!, spanBytes);
      }
      const spanBox = { start: [part.start[0], ...piece.start.slice(1)], length: spanLength };
      copyPart(target, box, span, spanBox, part);
    } finally {
      span.dispose();
    }
  }

  /** The open file holding `piece`, and its entry, checked to be f32 of the piece's size. */
  #stored(piece: SavedBox): { file: TensorFile; stored: TensorEntry } {
    let file = this.#files.get(piece.file);
    if (file === undefined) {
      file = TensorFile.open(`${this.dir}/${this.index.files[piece.file]}`);
      this.#files.set(piece.file, file);
    }
    const stored = file.entry(piece.key);
    if (stored === undefined) {
      throw new CheckpointError(file.path, `lacks "${piece.key}", which the index places there`);
    }
    // A version-1 file stores 0-d tensors as they are; their box is [1]: only the count matters.
    const count = stored.shape.reduce((a, b) => a * b, 1);
    if (stored.dtype !== "f32" || count !== volume(piece)) {
      throw new CheckpointError(
        file.path,
        `"${piece.key}" is ${stored.dtype} ${formatShape(stored.shape)}, the index says f32 ${
          formatShape(piece.length)
        }`,
      );
    }
    return { file, stored };
  }

  /** Closes every open file. */
  dispose(): void {
    for (const file of this.#files.values()) file.close();
  }
}
