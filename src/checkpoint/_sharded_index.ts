/**
 * The index of a sharded checkpoint (`index.json`) and each rank's piece list, with their zod
 * schemas: which boxes (N-D blocks, see [Note: boxes] in _boxes.ts) of which full tensor every
 * rank's safetensors file holds.
 *
 * [Note: sharded checkpoint layout]
 * `dir/index.json` is the only entry point. A save writes everything under a new folder
 * `dir/gen-N/`: each rank first its `rank-R.json`, its piece list (the boxes it holds), then, once
 * every rank's list is there, its `rank-R.safetensors` with the boxes no lower rank holds (each box
 * is saved once, by the lowest rank holding it: TP-replicated parameters and HSDP's replicas are
 * not written twice), and rank 0 then replaces the index atomically: until that rename the previous index, and the folder it
 * names, are what a load sees, so a crash at any point leaves the previous checkpoint loadable and
 * the new one invisible. Rank 0 then removes the folders no index names and temporary index files
 * of killed commits; a save that finds its generation's folder already there (a killed save's)
 * empties it first. tests/checkpoint/sharded_crash_test.ts kills real ranks at each step.
 * @module
 */

import { z } from "zod";
import {
  firstIssue,
  HyperparametersSchema,
  shown,
  StateScalarsSchema,
} from "../optim/hyperparameters.ts";
import { removeStaleTemporaries, writeFileAtomic } from "./_atomic.ts";
import { boxShape, intersect, volume } from "./_box_geometry.ts";
import { CheckpointError } from "../safetensors/errors.ts";

/** The index's format tag: version 2 records N-D boxes (version 1, dim-0 row ranges, still loads). */
export const FORMAT = "dtrain-sharded/2";
/** The first format, whose pieces were dim-0 row ranges (read, never written). */
const FORMAT_1 = "dtrain-sharded/1";

const int = z.number().int().nonnegative();
const shape = z.array(int);
const positive = z.number().int().positive();

/** A block of a full tensor (see [Note: boxes] in _boxes.ts). */
const boxSchema = z.strictObject({ start: z.array(int), length: z.array(positive) });

/** What a rank holds of one tensor: the full shape and its boxes, in local order. */
const pieceSchema = z.strictObject({ shape, boxes: z.array(boxSchema) });
/** One tensor's boxes, as a rank lists them. */
export type Piece = z.infer<typeof pieceSchema>;

/**
 * What one rank holds: its pieces, and (from every rank alike) optimizer scalars and groups, held
 * to the optimizers' own rules (optim/hyperparameters.ts). Written before any tensor, so that
 * every rank can tell which of its boxes another rank holds too (and then writes them).
 */
const rankSchema = z.strictObject({
  pieces: z.record(z.string(), pieceSchema),
  scalars: z.record(z.string(), StateScalarsSchema),
  paramGroups: z.array(HyperparametersSchema).nullable(),
});
/** A rank's piece list. */
export type RankPieces = z.infer<typeof rankSchema>;

/** A saved box: which file holds it, under which tensor name. */
const savedBoxSchema = boxSchema.extend({ file: int, key: z.string().min(1) }).strict();
/** One saved box. */
export type SavedBox = z.infer<typeof savedBoxSchema>;

const common = {
  generation: z.number().int().positive(),
  worldSize: z.number().int().positive(),
  files: z.array(z.string().regex(/^gen-\d+\/rank-\d+\.safetensors$/)),
  scalars: z.record(z.string(), StateScalarsSchema),
  paramGroups: z.array(HyperparametersSchema).nullable(),
  extra: z.record(z.string(), z.unknown()),
};
const indexSchema = z.strictObject({
  format: z.literal(FORMAT),
  ...common,
  tensors: z.record(z.string(), z.strictObject({ shape, pieces: z.array(savedBoxSchema) })),
});
const index1Schema = z.strictObject({
  format: z.literal(FORMAT_1),
  ...common,
  tensors: z.record(
    z.string(),
    z.strictObject({
      shape,
      pieces: z.array(z.strictObject({ file: int, rowStart: int, rows: positive })),
    }),
  ),
});
/** The validated index (a version-1 one read as version 2). */
export type Index = z.infer<typeof indexSchema>;

/** A version-1 index as version 2: each row range is the box of those rows, under its name. */
function fromVersion1(index: z.infer<typeof index1Schema>): Index {
  const tensors: Index["tensors"] = {};
  for (const [name, { shape, pieces }] of Object.entries(index.tensors)) {
    const rest = shape.slice(1);
    tensors[name] = {
      shape,
      pieces: pieces.map(({ file, rowStart, rows }) => ({
        file,
        key: name,
        start: [rowStart, ...rest.map(() => 0)],
        length: [rows, ...rest],
      })),
    };
  }
  return { ...index, format: FORMAT, tensors };
}

/** The index's path in `dir`. */
export function indexPath(dir: string): string {
  return `${dir}/index.json`;
}

/** Reads `path` as JSON checked by `schema`; every problem is a CheckpointError naming `path`. */
function readJson<T>(path: string, schema: z.ZodType<T>): T {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (err) {
    throw new CheckpointError(path, `cannot be read (${(err as Error).message})`, { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CheckpointError(path, `is not valid JSON (${(err as Error).message})`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = firstIssue(parsed.error, json);
    throw new CheckpointError(
      path,
      `${issue.path.join(".") || "the document"}: ${issue.message} (got ${shown(issue.seen)})`,
    );
  }
  return parsed.data;
}

/** The index of `dir`, validated (see {@linkcode checkIndex}), or null when there is none. */
export function readIndex(dir: string, required: boolean): Index | null {
  const path = indexPath(dir);
  try {
    Deno.statSync(path);
  } catch (err) {
    if (!required && err instanceof Deno.errors.NotFound) return null;
    throw new CheckpointError(path, "no sharded checkpoint here (the index is missing)", {
      cause: err,
    });
  }
  const read = readJson(path, z.discriminatedUnion("format", [indexSchema, index1Schema]));
  return checkIndex(path, read.format === FORMAT_1 ? fromVersion1(read) : read);
}

/** Checks that every tensor's pieces name a file and cover its elements exactly once. */
function checkIndex(path: string, index: Index): Index {
  for (const [name, { shape, pieces }] of Object.entries(index.tensors)) {
    const full = boxShape(shape);
    let covered = 0;
    pieces.forEach((piece, i) => {
      const where = `${name}: piece ${i} (start [${piece.start}], length [${piece.length}])`;
      if (piece.file >= index.files.length) {
        throw new CheckpointError(
          path,
          `${where} names file ${piece.file} of ${index.files.length}`,
        );
      }
      const fits = piece.start.length === full.length && piece.length.length === full.length &&
        piece.start.every((s, d) => s + piece.length[d] <= full[d]);
      if (!fits) throw new CheckpointError(path, `${where} is not inside the shape [${shape}]`);
      const other = pieces.findIndex((p, j) => j < i && intersect(p, piece) !== null);
      if (other >= 0) throw new CheckpointError(path, `${where} overlaps piece ${other}`);
      covered += volume(piece);
    });
    const total = volume({ start: [], length: full });
    if (covered !== total) {
      throw new CheckpointError(path, `${name}: pieces cover ${covered} elements of ${total}`);
    }
  }
  return index;
}

/**
 * Which rank writes each box, under which name: the lowest rank that holds it (replicas of a
 * box, TP-replicated or HSDP's, are written once), under the tensor's name when that rank holds
 * one box of it, else `name#i` for its `i`-th. Every rank computes it alike from every rank's
 * piece list.
 * @throws CheckpointError when two ranks disagree on a tensor's shape.
 */
export function assignBoxes(ranks: readonly RankPieces[], where: string): Index["tensors"] {
  const tensors: Index["tensors"] = {};
  const seen = new Map<string, Set<string>>();
  ranks.forEach(({ pieces }, file) => {
    for (const [name, { shape, boxes }] of Object.entries(pieces)) {
      const entry = tensors[name] ??= { shape, pieces: [] };
      if (entry.shape.join() !== shape.join()) {
        throw new CheckpointError(
          where,
          `${name} is [${shape}] on rank ${file} but [${entry.shape}] on a lower rank`,
        );
      }
      const known = seen.get(name) ?? seen.set(name, new Set()).get(name)!;
      boxes.forEach(({ start, length }, i) => {
        const id = `${start}|${length}`;
        if (known.has(id)) return;
        known.add(id);
        entry.pieces.push({ file, key: boxes.length === 1 ? name : `${name}#${i}`, start, length });
      });
    }
  });
  return tensors;
}

/** Reads every rank's piece list from `gen-N/` of `dir`. */
export function readRankPieces(dir: string, generation: number, worldSize: number): RankPieces[] {
  return Array.from(
    { length: worldSize },
    (_, r) => readJson(`${dir}/gen-${generation}/rank-${r}.json`, rankSchema),
  );
}

/** Writes this rank's piece list next to its tensors. */
export function writeRankPieces(path: string, pieces: RankPieces): void {
  const bytes = new TextEncoder().encode(JSON.stringify(pieces));
  writeFileAtomic(path, (file) => {
    for (let done = 0; done < bytes.length;) done += file.writeSync(bytes.subarray(done));
  });
}

/**
 * Every rank's optimizer scalars (AdamW's `step`) in one record: a pipeline's ranks hold
 * different parameters, and ranks holding the same parameter (its shards) must agree.
 *
 * @param dir The checkpoint folder, for the error.
 * @param ranks Every rank's piece list, by rank.
 * @throws CheckpointError naming the parameter, the field and the two ranks that disagree.
 */
export function mergeScalars(
  dir: string,
  ranks: readonly RankPieces[],
): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  const from: Record<string, number> = {};
  ranks.forEach(({ scalars }, rank) => {
    for (const [name, fields] of Object.entries(scalars)) {
      const merged = out[name] ??= {};
      for (const [field, v] of Object.entries(fields)) {
        const seen = merged[field];
        if (seen !== undefined && !Object.is(seen, v)) {
          throw new CheckpointError(
            dir,
            `ranks disagree on the optimizer's ${field} of ${name}: rank ${
              from[`${name}/${field}`]
            } has ${seen}, rank ${rank} has ${v} (were they stepped alike?)`,
          );
        }
        merged[field] = v;
        from[`${name}/${field}`] ??= rank;
      }
    }
  });
  return out;
}

/**
 * Builds the index from every rank's piece list and their merged optimizer scalars
 * (`mergeScalars`; rank 0, after all ranks wrote).
 */
export function buildIndex(
  dir: string,
  generation: number,
  ranks: readonly RankPieces[],
  scalars: Record<string, Record<string, number>>,
  extra: Record<string, unknown>,
): Index {
  const folder = `gen-${generation}`;
  return {
    format: FORMAT,
    generation,
    worldSize: ranks.length,
    files: ranks.map((_, r) => `${folder}/rank-${r}.safetensors`),
    tensors: assignBoxes(ranks, `${dir}/${folder}`),
    scalars,
    paramGroups: ranks[0].paramGroups,
    extra,
  };
}

/**
 * Commits `index` atomically, then removes generation folders it does not name and the
 * temporary index files of commits killed before their rename.
 */
export function commitIndex(dir: string, index: Index): void {
  const path = indexPath(dir);
  checkIndex(path, index);
  const bytes = new TextEncoder().encode(JSON.stringify(index, null, 1));
  writeFileAtomic(path, (file) => {
    for (let done = 0; done < bytes.length;) done += file.writeSync(bytes.subarray(done));
  });
  for (const entry of Deno.readDirSync(dir)) {
    if (
      entry.isDirectory && /^gen-\d+$/.test(entry.name) && entry.name !== `gen-${index.generation}`
    ) {
      Deno.removeSync(`${dir}/${entry.name}`, { recursive: true });
    }
  }
  removeStaleTemporaries(path);
}
