/**
 * What a rank holds of a model's parameters and AdamW state, in N-D pieces (a TP shard, FSDP's
 * rows of it), and the full tensors that all ranks' pieces make up: what the N-D checkpoint
 * reshard tests compare, exactly, between the saving and the loading layouts.
 * @module
 */

import assert from "node:assert/strict";
import type { Module } from "../../src/nn/module.ts";
import type { Optimizer } from "../../src/optim/optimizer.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { type Held, placements, shardOf } from "../parallel/workers/tp_problem.ts";

/** One tensor as a rank holds it. */
export interface Piece {
  held: Held;
  values: number[];
}

/** A rank's pieces, by name ("model/<fqn>", "optim/<fqn>/<field>"), and its TP rank and size. */
export interface Holdings {
  tpRank: number;
  tpSize: number;
  pieces: Record<string, Piece>;
  /** AdamW's per-parameter numbers (its step count), by fqn. */
  scalars: Record<string, Record<string, number>>;
}

/** What this rank holds of `model`'s parameters and `optimizer`'s state. */
export function holdings(
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  tpRank: number,
  tpSize: number,
): Holdings {
  const where = placements(model);
  const pieces: Record<string, Piece> = {};
  const scalars: Record<string, Record<string, number>> = {};
  for (const [fqn, p] of model.namedParameters()) {
    const held = where[fqn];
    pieces[`model/${fqn}`] = { held, values: Array.from(p.toArray()) };
    for (const [field, v] of Object.entries(optimizer.state.get(p) ?? {})) {
      if (typeof v === "number") (scalars[fqn] ??= {})[field] = v;
      else pieces[`optim/${fqn}/${field}`] = { held, values: Array.from((v as Tensor).toArray()) };
    }
  }
  return { tpRank, tpSize, pieces, scalars };
}

/**
 * The full tensors that the ranks' pieces make up, by name (and the scalars, the same on every
 * rank). Fails when an element is held by none, or by two ranks with different values (HSDP's
 * replicas and a TP-replicated tensor's ranks must agree bitwise).
 */
export function assemble(
  ranks: readonly Holdings[],
): { full: Record<string, number[]>; scalars: Holdings["scalars"] } {
  const full: Record<string, number[]> = {};
  for (const { tpRank, tpSize, pieces } of ranks) {
    for (const [name, { held, values }] of Object.entries(pieces)) {
      const n = held.fullShape.reduce((a, b) => a * b, 1);
      const out = full[name] ??= new Array<number>(n).fill(NaN);
      // Which full elements the piece's values are: the same cut of the indices 0 .. n - 1.
      const at = shardOf(Array.from({ length: n }, (_, i) => i), held, tpRank, tpSize);
      assert.equal(at.length, values.length, `${name}: the piece's size`);
      at.forEach((f, j) => {
        if (!Number.isNaN(out[f])) {
          assert.equal(values[j], out[f], `${name}[${f}]: two ranks hold different values`);
        }
        out[f] = values[j];
      });
    }
  }
  for (const [name, values] of Object.entries(full)) {
    const missing = values.findIndex((v) => Number.isNaN(v));
    assert.equal(missing, -1, `${name}: element ${missing} is held by no rank`);
  }
  for (const r of ranks.slice(1)) assert.deepEqual(r.scalars, ranks[0].scalars, "scalars");
  return { full, scalars: ranks[0].scalars };
}
