/**
 * The index of a sharded checkpoint (`index.json`) and each rank's piece list, with their zod
 * schemas: which rows of which full tensor every rank's safetensors file holds.
 *
 * [Note: sharded checkpoint layout]
 * `dir/index.json` is the only entry point. A save writes everything under a new folder
 * `dir/gen-N/` (each rank its `rank-R.safetensors` and `rank-R.json`, its piece list), and rank 0
 * then replaces the index atomically: until that rename the previous index, and the folder it
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
import { CheckpointError } from "./errors.ts";

/** The index's format tag. */
export const FORMAT = "dtrain-sharded/1";

const int = z.number().int().nonnegative();
const shape = z.array(int);

/** Rows `rowStart .. rowStart + rows - 1` of a tensor, held by one rank. */
const pieceSchema = z.strictObject({ shape, rowStart: int, rows: z.number().int().positive() });
/** One piece, as a rank lists it. */
export type Piece = z.infer<typeof pieceSchema>;

/**
 * What one rank wrote: its pieces, and (from every rank alike) optimizer scalars and groups, held
 * to the optimizers' own rules (optim/hyperparameters.ts).
 */
const rankSchema = z.strictObject({
  pieces: z.record(z.string(), pieceSchema),
  scalars: z.record(z.string(), StateScalarsSchema),
  paramGroups: z.array(HyperparametersSchema).nullable(),
});
/** A rank's piece list. */
export type RankPieces = z.infer<typeof rankSchema>;

const indexSchema = z.strictObject({
  format: z.literal(FORMAT),
  generation: z.number().int().positive(),
  worldSize: z.number().int().positive(),
  files: z.array(z.string().regex(/^gen-\d+\/rank-\d+\.safetensors$/)),
  tensors: z.record(
    z.string(),
    z.strictObject({
      shape,
      pieces: z.array(
        z.strictObject({ file: int, rowStart: int, rows: z.number().int().positive() }),
      ),
    }),
  ),
  scalars: z.record(z.string(), StateScalarsSchema),
  paramGroups: z.array(HyperparametersSchema).nullable(),
  extra: z.record(z.string(), z.unknown()),
});
/** The validated index. */
export type Index = z.infer<typeof indexSchema>;

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
  return checkIndex(path, readJson(path, indexSchema));
}

/** Checks that every tensor's pieces name a file and cover its rows exactly once. */
function checkIndex(path: string, index: Index): Index {
  for (const [name, { shape, pieces }] of Object.entries(index.tensors)) {
    const rows = shape.length === 0 ? 1 : shape[0];
    const sorted = [...pieces].sort((a, b) => a.rowStart - b.rowStart);
    let next = 0;
    for (const piece of sorted) {
      if (piece.file >= index.files.length) {
        throw new CheckpointError(
          path,
          `${name}: a piece names file ${piece.file} of ${index.files.length}`,
        );
      }
      if (piece.rowStart !== next) {
        throw new CheckpointError(
          path,
          `${name}: rows ${next}.. are not covered exactly once (a piece starts at ${piece.rowStart})`,
        );
      }
      next += piece.rows;
    }
    if (next !== rows) {
      throw new CheckpointError(path, `${name}: pieces cover ${next} rows of ${rows}`);
    }
  }
  return index;
}

/** Writes this rank's piece list next to its tensors. */
export function writeRankPieces(path: string, pieces: RankPieces): void {
  const bytes = new TextEncoder().encode(JSON.stringify(pieces));
  writeFileAtomic(path, (file) => {
    for (let done = 0; done < bytes.length;) done += file.writeSync(bytes.subarray(done));
  });
}

/** Builds the index from every rank's piece list (rank 0, after all ranks wrote). */
export function buildIndex(
  dir: string,
  generation: number,
  worldSize: number,
  extra: Record<string, unknown>,
): Index {
  const folder = `gen-${generation}`;
  const ranks = Array.from(
    { length: worldSize },
    (_, r) => readJson(`${dir}/${folder}/rank-${r}.json`, rankSchema),
  );
  const tensors: Index["tensors"] = {};
  ranks.forEach(({ pieces }, file) => {
    for (const [name, { shape, rowStart, rows }] of Object.entries(pieces)) {
      tensors[name] ??= { shape, pieces: [] };
      tensors[name].pieces.push({ file, rowStart, rows });
    }
  });
  return {
    format: FORMAT,
    generation,
    worldSize,
    files: ranks.map((_, r) => `${folder}/rank-${r}.safetensors`),
    tensors,
    scalars: ranks[0].scalars,
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
