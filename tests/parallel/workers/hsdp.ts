/**
 * Worker for hsdp_test.ts, on 4 ranks as a 2 (dp_replicate) × 2 (dp_shard) mesh:
 * - the bad options' errors;
 * - HSDP training of hsdp_problem's GPT for STEPS clipped AdamW steps, each rank on its quarter of
 *   the global batch (losses, gradient rows, norms, the full weights, lastStats), then a sharded
 *   checkpoint of it in DIR/hsdp; the same training under each AC_CASES entry (activation
 *   checkpointing before or after fullyShard);
 * - the first step again under bf16 and f16 mixed precision (gradient rows and lastStats);
 * - resharding: FSDP over the world (4) and over each dp_shard pair (a 1-D mesh: FSDP 2) load
 *   DIR/hsdp, save it again (DIR/fsdp4, and DIR/fsdp2 from the pair of replica 0) and take one
 *   step; HSDP then loads DIR/fsdp4, DIR/fsdp2 and DIR/single (saved by one process) and takes
 *   one step.
 * @module
 */

import { loadSharded } from "../../../src/checkpoint/sharded.ts";
import { saveSharded } from "../../../src/checkpoint/sharded_save.ts";
import {
  destroyProcessGroup,
  type DeviceMesh,
  getRank,
  initDeviceMesh,
  initProcessGroup,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import { MLP } from "../../../src/nn/container.ts";
import {
  applyActivationCheckpointing,
  fullStateDict,
  fullyShard,
  type FullyShardOptions,
  type MixedPrecisionPolicy,
} from "../../../src/parallel/mod.ts";
import { runWorker } from "../../_harness/worker.ts";
import { buildOptimizer, innerModules, stateValues } from "./fsdp_problem.ts";
import { freshModel, STEPS, trainSteps } from "./hsdp_problem.ts";

const dir = Deno.env.get("DIR")!;

/**
 * Activation checkpointing of an HSDP run: full (every block) or selective (every second block),
 * applied before fullyShard (torchtitan's order) or after.
 */
export interface AC {
  label: string;
  mode: "full" | "selective";
  afterShard: boolean;
}

/**
 * A fresh GPT, its blocks and then the root fully sharded with `options` (and activation
 * checkpointing as `ac` says), its AdamW and the blocks checkpointed.
 */
function shard(options: FullyShardOptions, ac?: AC) {
  const { model: built } = freshModel();
  const checkpoint = () =>
    applyActivationCheckpointing(
      built,
      ac!.mode === "full" ? { mode: "full" } : { mode: "selective", every: 2 },
    );
  const wrapped = ac !== undefined && !ac.afterShard ? checkpoint() : [];
  for (const m of innerModules(built)) fullyShard(m, options);
  const model = fullyShard(built, options);
  if (ac?.afterShard) wrapped.push(...checkpoint());
  return { model, optimizer: buildOptimizer(model.parameters()), wrapped };
}

/** The message of what `fn` throws, or "no error". */
function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  return "no error";
}

async function errors(mesh: DeviceMesh) {
  const cube = await initDeviceMesh("cpu", [2, 1, 2], { meshDimNames: ["a", "b", "c"] });
  const mlp = () => new MLP([4, 3]);
  return {
    both: errorOf(() => fullyShard(mlp(), { group: worldGroup(), mesh })),
    threeD: errorOf(() => fullyShard(mlp(), { mesh: cube })),
    notMesh: errorOf(() => fullyShard(mlp(), { mesh: { ndim: 2 } as unknown as DeviceMesh })),
    device: errorOf(() => fullyShard(mlp().to("emu:0"), { mesh })),
  };
}

/** Loads `from` into a model sharded with `options`, saves it to `to` (if given), takes a step. */
async function resume(
  options: FullyShardOptions,
  part: number,
  parts: number,
  from: string,
  to?: { dir: string; write: boolean },
) {
  const { model, optimizer } = shard(options);
  loadSharded(from, { model, optimizer });
  const loaded = stateValues(await fullStateDict(model));
  if (to !== undefined) {
    const group = options.mesh?.getGroup() ?? options.group;
    // Both pairs save (a collective within each), each into its own folder.
    await saveSharded(to.write ? to.dir : `${to.dir}-other`, { model, optimizer, group });
  }
  await trainSteps(model, optimizer, STEPS, STEPS + 1, part, parts, (l) => model.backward(l));
  return { loaded, final: stateValues(await fullStateDict(model)) };
}

/** One step of HSDP under `mpPolicy`: the gradient rows and the communication counted. */
async function mixed(mesh: DeviceMesh, mpPolicy: MixedPrecisionPolicy) {
  const { model, optimizer } = shard({ mesh, mpPolicy });
  const trace = await trainSteps(model, optimizer, 0, 1, getRank(), 4, (l) => model.backward(l));
  return { grads: trace.grads[0], stats: model.lastStats };
}

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
  try {
    const rank = getRank();
    const mesh = await initDeviceMesh("cpu", [2, 2], {
      meshDimNames: ["dp_replicate", "dp_shard"],
    });
    const bad = await errors(mesh);

    // HSDP: the mesh is row-major, so data-parallel index = replicate × 2 + shard = the rank.
    const { model, optimizer } = shard({ mesh });
    const trace = await trainSteps(model, optimizer, 0, STEPS, rank, 4, (l) => model.backward(l));
    const final = stateValues(await fullStateDict(model));
    const stats = model.lastStats;
    await saveSharded(`${dir}/hsdp`, { model, optimizer });

    // The same training with activation checkpointing (AC_CASES), checked against the same.
    const checkpointed = [];
    for (const ac of JSON.parse(Deno.env.get("AC_CASES")!) as AC[]) {
      const run = shard({ mesh }, ac);
      const trace = await trainSteps(run.model, run.optimizer, 0, STEPS, rank, 4, (l) => {
        return run.model.backward(l);
      });
      const final = stateValues(await fullStateDict(run.model));
      checkpointed.push({ trace, final, wrapped: run.wrapped });
    }

    const bf16 = await mixed(mesh, { paramDtype: "bf16" });
    const f16 = await mixed(mesh, { paramDtype: "f16" });

    const [replica, pairRank] = mesh.getCoordinate();
    const fsdp4 = await resume({}, rank, 4, `${dir}/hsdp`, { dir: `${dir}/fsdp4`, write: true });
    const pair = mesh.get("dp_shard");
    const fsdp2 = await resume({ mesh: pair }, pairRank, 2, `${dir}/hsdp`, {
      dir: `${dir}/fsdp2`,
      write: replica === 0,
    });
    const fromFsdp4 = await resume({ mesh }, rank, 4, `${dir}/fsdp4`);
    const fromFsdp2 = await resume({ mesh }, rank, 4, `${dir}/fsdp2`);
    const fromSingle = await resume({ mesh }, rank, 4, `${dir}/single`);
    return {
      errors: bad,
      coordinate: mesh.getCoordinate(),
      trace,
      final,
      stats,
      checkpointed,
      worldSize: model.worldSize,
      bf16,
      f16,
      fsdp4,
      fsdp2,
      fromFsdp4,
      fromFsdp2,
      fromSingle,
    };
  } finally {
    await destroyProcessGroup();
  }
});
