/**
 * Worker for nd_reshard_test.ts, on tp_problem's tiny GPT (tied embedding, fused q|k|v, biases)
 * and its AdamW after one step. CASE picks the scenario:
 * - "saveTP" (2 ranks): tensor-parallel (sequence and loss parallel), one step on the whole
 *   batch, a sharded checkpoint in DIR/tp;
 * - "saveHSDP" (4 ranks, 2 × 2 mesh): fully sharded per block and on the root, one step on this
 *   rank's quarter of the batch, a sharded checkpoint in DIR/hsdp;
 * - "load" (2 ranks): FSDP 2 loads DIR/tp, then TP 2 loads DIR/hsdp.
 * Each reports what every rank holds (see _nd_state.ts).
 * @module
 */

import { loadSharded, saveSharded } from "../../src/checkpoint/mod.ts";
import {
  destroyProcessGroup,
  getRank,
  initDeviceMesh,
  initProcessGroup,
} from "../../src/distributed/mod.ts";
import type { GPT } from "../../src/nn/gpt.ts";
import * as parallel from "../../src/parallel/mod.ts";
import { tidyAsync } from "../../src/tensor/scope.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { runWorker } from "../_harness/worker.ts";
import { batch, buildModel, buildOptimizer } from "../parallel/workers/tp_problem.ts";
import { holdings } from "./_nd_state.ts";

const dir = Deno.env.get("DIR")!;

/** One AdamW step on rows `part` of `parts` of batch 0 (4 sequences), backward by `backward`. */
async function step(
  model: GPT,
  part: number,
  parts: number,
  backward: (loss: Tensor) => Promise<void> | void,
) {
  const optimizer = buildOptimizer(model.parameters());
  await tidyAsync(async () => {
    const [x, y] = batch(0, false, 4);
    const rows = 4 / parts, mine = (t: Tensor) => t.narrow(0, part * rows, rows).contiguous();
    await backward(model.forward(mine(x), mine(y)).loss);
    optimizer.step();
    optimizer.zeroGrad();
  });
  return optimizer;
}

/** `model` fully sharded per block and on the root over `options`' group or mesh. */
function shard(model: GPT, options: parallel.FullyShardOptions) {
  for (const block of model.transformer.h) parallel.fullyShard(block, options);
  return parallel.fullyShard(model, options);
}

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
  try {
    const rank = getRank(), what = Deno.env.get("CASE");
    if (what === "saveTP") {
      const tp = await initDeviceMesh("cpu", [2], { meshDimNames: ["tp"] });
      const model = parallel.parallelizeGPT(buildModel(), tp, {
        sequenceParallel: true,
        lossParallel: true,
      });
      const optimizer = await step(model, 0, 1, (loss) => loss.backward());
      await saveSharded(`${dir}/tp`, { model, optimizer });
      return { saved: holdings(model, optimizer, rank, 2) };
    }
    if (what === "saveHSDP") {
      const mesh = await initDeviceMesh("cpu", [2, 2], {
        meshDimNames: ["dp_replicate", "dp_shard"],
      });
      const model = shard(buildModel(), { mesh });
      const optimizer = await step(model, rank, 4, (loss) => model.backward(loss));
      await saveSharded(`${dir}/hsdp`, { model, optimizer });
      return { saved: holdings(model, optimizer, 0, 1) };
    }
    const tp = await initDeviceMesh("cpu", [2], { meshDimNames: ["tp"] });
    const fsdp = shard(buildModel(), {});
    const fsdpOptimizer = buildOptimizer(fsdp.parameters());
    loadSharded(`${dir}/tp`, { model: fsdp, optimizer: fsdpOptimizer });
    const tpModel = parallel.parallelizeGPT(buildModel(), tp, { sequenceParallel: true });
    const tpOptimizer = buildOptimizer(tpModel.parameters());
    loadSharded(`${dir}/hsdp`, { model: tpModel, optimizer: tpOptimizer });
    return {
      fsdpFromTP: holdings(fsdp, fsdpOptimizer, 0, 1),
      tpFromHSDP: holdings(tpModel, tpOptimizer, rank, 2),
    };
  } finally {
    await destroyProcessGroup();
  }
});
