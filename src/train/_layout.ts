/**
 * The job's N-D layout, torchtitan's: `--pp` × `--dp-replicate` × `--dp-shard` × `--tp` ranks
 * (row-major, so the ranks of one TP group are neighbours, on one node), their product the world
 * size.
 *
 * - The degrees: `-1` (the default of both data-parallel ones) is "the rest" of the world size,
 *   as torchtitan's `data_parallel_shard_degree = -1`. Under `--strategy fsdp` the rest goes to
 *   dp-shard (dp-replicate 1), under `--strategy ddp` to dp-replicate (DDP replicates; dp-shard
 *   must be 1). An explicit product that is not the world size is refused, naming the three.
 * - The mesh `["pp", "dp_replicate", "dp_shard", "tp"]` (all four dimensions, size 1 or not, so that
 *   `mesh.get("tp")` always exists) is made once per job after `initProcessGroup`, when the
 *   layout is more than one data-parallel dimension (TP, or HSDP); a plain DDP or FSDP run keeps
 *   the world group as its data-parallel group, as before.
 * - The data-parallel rank is this rank's coordinate in the flattened dp dimensions: the ranks of
 *   one TP group share it, and so read the same batches (they compute one model replica together).
 * @module
 */

import type { DeviceMesh } from "../distributed/device_mesh.ts";
import { initDeviceMesh } from "../distributed/device_mesh.ts";
import { getRank, getWorldSize, isInitialized } from "../distributed/mod.ts";
import type { ProcessGroup } from "../distributed/process_group.ts";
import { ConfigError, type TrainConfig } from "./_schema.ts";
import { checkPipelineFits } from "./_pp_config.ts";

type Parallelism = Pick<TrainConfig, "tp" | "dpShard" | "dpReplicate" | "strategy"> & {
  pp?: number;
};

/** The four degrees, resolved: their product is the world size. */
export interface Degrees {
  pp: number;
  dpReplicate: number;
  dpShard: number;
  tp: number;
}

/**
 * The degrees of `config` on `worldSize` ranks, `-1` resolved (see the module doc).
 * @param world How the world size is made up, for the message (e.g. "--nproc-per-node 2").
 * @throws ConfigError naming the three degrees and the world size when they do not fit, and
 *   `--dp-shard` above 1 under `--strategy ddp`.
 */
export function resolveDegrees(config: Parallelism, worldSize: number, world = ""): Degrees {
  const { tp, strategy } = config, pp = config.pp ?? 1;
  let { dpShard, dpReplicate } = config;
  if (strategy === "ddp") {
    if (dpShard > 1) {
      throw new ConfigError(
        "dpShard",
        `${dpShard} shards the parameters, which is --strategy fsdp (FSDP, or HSDP with ` +
          `--dp-replicate); this run is --strategy ddp, which replicates the model over ` +
          `--dp-replicate`,
      );
    }
    dpShard = 1;
  } else if (dpShard === -1 && dpReplicate === -1) dpReplicate = 1;
  const of = `the world size (${worldSize} processes${world ? `: ${world}` : ""})`;
  // A run without a pipeline names the three degrees it has, as before --pp.
  const field = `${pp > 1 ? "pp × " : ""}tp × dpReplicate × dpShard`;
  const ppFlag = pp > 1 ? `--pp ${pp} × ` : "";
  const rest = (known: number, name: string) => {
    const n = worldSize / (pp * tp * known);
    if (!Number.isInteger(n)) {
      throw new ConfigError(
        field,
        `${ppFlag}--tp ${tp} × --${name} ${known} does not divide ${of}, so there is no --${
          name === "dp-shard" ? "dp-replicate" : "dp-shard"
        } for the rest`,
      );
    }
    return n;
  };
  if (dpShard === -1) dpShard = rest(dpReplicate, "dp-replicate");
  if (dpReplicate === -1) dpReplicate = rest(dpShard, "dp-shard");
  if (pp * tp * dpReplicate * dpShard !== worldSize) {
    throw new ConfigError(
      field,
      `${ppFlag}--tp ${tp} × --dp-replicate ${dpReplicate} × --dp-shard ${dpShard} = ` +
        `${pp * tp * dpReplicate * dpShard} must equal ${of}`,
    );
  }
  return { pp, dpReplicate, dpShard, tp };
}

/**
 * What the layout asks of the model, checked before any process starts: a GPT (the only model
 * with a tensor-parallel plan and transformer blocks to checkpoint), heads (and, with sequence
 * parallelism, the block size) divisible by `--tp`.
 * @throws ConfigError naming the flag.
 */
export function checkLayoutFits(config: TrainConfig): void {
  const { tp, model } = config;
  checkPipelineFits(config);
  if (model !== "gpt" && tp > 1) {
    throw new ConfigError("tp", `tensor parallelism has a plan for --model gpt only, got ${model}`);
  }
  if (model !== "gpt" && config.ac !== "none") {
    throw new ConfigError(
      "ac",
      `activation checkpointing wraps transformer blocks: --model gpt only, got ${model}`,
    );
  }
  if (tp === 1) return;
  if (config.nHead % tp !== 0) {
    throw new ConfigError(
      "tp",
      `must divide nHead (${config.nHead}): each TP rank computes nHead / tp heads, got ${tp}`,
    );
  }
  if (config.sequenceParallel && config.blockSize % tp !== 0) {
    throw new ConfigError(
      "tp",
      `must divide blockSize (${config.blockSize}) with sequence parallelism (each TP rank keeps ` +
        `blockSize / tp positions; or --sequence-parallel false), got ${tp}`,
    );
  }
}

/**
 * Refuses a vocabulary `--tp` does not divide (the embedding and `lm_head` are split on it).
 * @throws ConfigError ("tp") naming both.
 */
export function checkVocabFits(tp: number, vocabSize: number): void {
  if (vocabSize % tp === 0) return;
  throw new ConfigError(
    "tp",
    `must divide the vocabulary (${vocabSize}): the embedding and lm_head are split on it, got ${tp}`,
  );
}

/** A job's ranks in their layout. */
export interface Layout {
  degrees: Degrees;
  /** This rank's coordinate in the flattened data-parallel dimensions (shared by a TP group). */
  dpRank: number;
  /** Data-parallel ranks: dp-replicate × dp-shard. */
  dpSize: number;
  /** The `["pp", "dp_replicate", "dp_shard", "tp"]` mesh, or null when the world is the dp group. */
  mesh: DeviceMesh | null;
  /** The tensor-parallel mesh (1-D), or null without TP. */
  tpMesh: DeviceMesh | null;
  /**
   * FSDP's mesh: 2-D (dp_replicate, dp_shard) for HSDP, else the flattened dp dimensions; null for
   * the world group.
   */
  fsdpMesh: DeviceMesh | null;
  /** DDP's group: the flattened dp dimensions, or null for the world group. */
  dpGroup: ProcessGroup | null;
  /** The pipeline's group (the `pp` dimension: one rank of each stage), or null without `--pp`. */
  ppGroup: ProcessGroup | null;
}

/**
 * The layout of `config` on this job's ranks, its mesh made when it needs one (every rank calls
 * this once, after `initProcessGroup`, or without a group for a lone DDP process).
 * @throws ConfigError when the degrees do not fit the world size.
 */
export async function makeLayout(config: TrainConfig): Promise<Layout> {
  const grouped = isInitialized();
  const worldSize = grouped ? getWorldSize() : 1;
  const degrees = resolveDegrees(config, worldSize);
  const { pp, dpReplicate, dpShard, tp } = degrees;
  const dpSize = dpReplicate * dpShard;
  const plain = { degrees, dpSize, mesh: null, tpMesh: null, fsdpMesh: null, dpGroup: null };
  if (pp === 1 && tp === 1 && (dpReplicate === 1 || dpShard === 1)) {
    return { ...plain, dpRank: grouped ? getRank() : 0, ppGroup: null };
  }
  // The pipeline outermost, as torchtitan's mesh: a stage's ranks (its dp × tp) are neighbours.
  const mesh = await initDeviceMesh(config.device, [pp, dpReplicate, dpShard, tp], {
    meshDimNames: ["pp", "dp_replicate", "dp_shard", "tp"],
  });
  const dp = mesh.get(["dp_replicate", "dp_shard"]).flatten("dp");
  const hsdp = dpReplicate > 1 && dpShard > 1;
  return {
    degrees,
    dpSize,
    dpRank: dp.getLocalRank(),
    mesh,
    tpMesh: tp > 1 ? mesh.get("tp") : null,
    // --dp-shard 1 under fsdp shards over the replicas instead (the same numbers as replicating,
    // as a plain FSDP run over the world group): a mesh of the one-rank dp_shard dimension alone
    // would leave each replica's gradients its own.
    fsdpMesh: hsdp ? mesh.get(["dp_replicate", "dp_shard"]) : dp,
    dpGroup: dp.getGroup(),
    ppGroup: pp > 1 ? mesh.get("pp").getGroup() : null,
  };
}

/**
 * Whether the job's snapshot is a sharded folder: every rank's shards (FSDP, or TP's), or its
 * pipeline stages' parameters (PP's, under the whole model's names).
 */
export function shardedSnapshots(
  config: Pick<TrainConfig, "strategy" | "tp"> & { pp?: number },
): boolean {
  return config.strategy === "fsdp" || config.tp > 1 || (config.pp ?? 1) > 1;
}

/**
 * The layout of a plain data-parallel job (every rank its own dp rank, the world group), for a
 * trainer made without {@linkcode makeLayout}.
 */
export function worldLayout(): Layout {
  const grouped = isInitialized();
  const worldSize = grouped ? getWorldSize() : 1;
  const degrees = { pp: 1, dpReplicate: worldSize, dpShard: 1, tp: 1 };
  return {
    degrees,
    dpSize: worldSize,
    dpRank: grouped ? getRank() : 0,
    mesh: null,
    tpMesh: null,
    fsdpMesh: null,
    dpGroup: null,
    ppGroup: null,
  };
}
