/**
 * Healing: a replica that joins a quorum behind its peers receives their state (weights,
 * optimizer state, step, data position) from a live member over the quorum's communicator,
 * never from a checkpoint file (torchft's `PGTransport`).
 * @module
 */

import type { ProcessGroup } from "../../distributed/process_group.ts";
import { DistError } from "../../distributed/errors.ts";
import { tensor, zeros } from "../../tensor/creation.ts";
import type { DType } from "../../tensor/dtype.ts";
import { Tensor } from "../../tensor/tensor.ts";

/**
 * State a replica shares with one that heals (torchft's `register_state_dict_fn`): a tree of
 * plain objects, arrays, numbers, strings, booleans, nulls and tensors.
 */
export interface ReplicaState {
  /** The state now; its tensors are read, not kept. */
  stateDict(): unknown;
  /** Takes the state a peer sent (tensors freshly made here, to copy from). */
  loadStateDict(state: unknown): void;
}

/** Where a tensor sits in the sent tree. */
interface TensorSlot {
  $tensor: number;
  shape: number[];
  dtype: DType;
}

const SENDABLE: readonly DType[] = ["f32", "i32", "bf16", "f16"];

/** The tree with each tensor replaced by its slot, and the tensors in slot order. */
function split(tree: unknown, tensors: Tensor[], path: string, group: ProcessGroup): unknown {
  if (tree instanceof Tensor) {
    if (!SENDABLE.includes(tree.dtype)) {
      throw new DistError(
        "invalid",
        `heal: ${path} is ${tree.dtype}; a healing peer receives ${SENDABLE.join(", ")} tensors`,
      );
    }
    if (!group.reaches(tree.device)) {
      throw new DistError(
        "invalid",
        `heal: ${path} is on ${tree.device}, which the quorum's communicator does not reach; ` +
          "copy it to the host in the registered stateDict()",
      );
    }
    tensors.push(tree.isContiguous() ? tree : tree.contiguous());
    return { $tensor: tensors.length - 1, shape: [...tree.shape], dtype: tree.dtype };
  }
  if (Array.isArray(tree)) return tree.map((v, i) => split(v, tensors, `${path}[${i}]`, group));
  if (tree !== null && typeof tree === "object") {
    return Object.fromEntries(
      Object.entries(tree).map(([k, v]) => [k, split(v, tensors, `${path}.${k}`, group)]),
    );
  }
  return tree;
}

/** The tree `split` made, its slots filled with `tensors`. */
function join(tree: unknown, tensors: Tensor[]): unknown {
  if (Array.isArray(tree)) return tree.map((v) => join(v, tensors));
  if (tree !== null && typeof tree === "object") {
    if ("$tensor" in tree) return tensors[(tree as TensorSlot).$tensor];
    return Object.fromEntries(Object.entries(tree).map(([k, v]) => [k, join(v, tensors)]));
  }
  return tree;
}

/** Every slot of a split tree, in slot order. */
function slots(tree: unknown, out: TensorSlot[] = []): TensorSlot[] {
  if (Array.isArray(tree)) tree.forEach((v) => slots(v, out));
  else if (tree !== null && typeof tree === "object") {
    if ("$tensor" in tree) out[(tree as TensorSlot).$tensor] = tree as TensorSlot;
    else Object.values(tree).forEach((v) => slots(v, out));
  }
  return out;
}

/**
 * Sends `state` from the member `source` (a replica id) to every other member of `group`: one
 * broadcast of the tree's layout, then one per tensor, bytes as they are (so a healed replica
 * equals its source bit for bit). A collective: every member calls it; the source passes its
 * state, the others null.
 *
 * @returns On every member but the source, the tree and its tensors (new: the caller disposes
 *   them); null on the source.
 */
export async function broadcastState(
  group: ProcessGroup,
  source: number,
  state: unknown,
): Promise<{ state: unknown; tensors: Tensor[] } | null> {
  const sending = group.ranks[group.rank] === source;
  const tensors: Tensor[] = [];
  const layout = sending
    ? new TextEncoder().encode(JSON.stringify(split(state, tensors, "state", group)))
    : null;
  const length = tensor(Int32Array.of(layout?.length ?? 0), [1], { dtype: "i32" });
  await group.broadcast(length, source).wait();
  const bytes = (length.toArray() as Int32Array)[0];
  length.dispose();
  const words = new Int32Array(Math.ceil(bytes / 4));
  if (layout !== null) new Uint8Array(words.buffer).set(layout);
  const wire = tensor(words, [words.length], { dtype: "i32" });
  await group.broadcast(wire, source).wait();
  const landed = wire.toArray() as Int32Array;
  const received = new Uint8Array(landed.buffer, landed.byteOffset, bytes);
  const tree = JSON.parse(new TextDecoder().decode(received));
  wire.dispose();
  const arriving = sending ? tensors : slots(tree).map((s) => zeros(s.shape, { dtype: s.dtype }));
  for (const t of arriving) await group.broadcast(t, source).wait();
  return sending ? null : { state: join(tree, arriving), tensors: arriving };
}
