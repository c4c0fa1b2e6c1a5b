/**
 * Worker for pp_reshard_test.ts, on tp_problem's tiny GPT (2 blocks, tied embedding) and its
 * AdamW, on 8 ranks. CASE picks the scenario:
 * - "save": a 2 (pp) × 2 (dp_shard) × 2 (tp) mesh, parallelizePipelineGPT (1F1B, 2
 *   microbatches), one step on this dp rank's half of a batch of 8, a sharded checkpoint of this
 *   rank's stage in DIR;
 * - "load": a 4 (pp) × 2 (dp_shard) mesh (4 stages: the embeddings alone, one block each, the head
 *   alone; no TP), each rank's stage and AdamW loaded from DIR.
 * Each reports what it holds (see _nd_state.ts).
 * @module
 */

import { loadSharded, saveSharded } from "../../src/checkpoint/mod.ts";
import {
  destroyProcessGroup,
  initDeviceMesh,
  initProcessGroup,
} from "../../src/distributed/mod.ts";
import * as parallel from "../../src/parallel/mod.ts";
import { crossEntropy } from "../../src/tensor/ops/cross_entropy.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { runWorker } from "../_harness/worker.ts";
import { batch, buildModel, buildOptimizer, GPT_CONFIG } from "../parallel/workers/tp_problem.ts";
import { holdings } from "./_nd_state.ts";

const dir = Deno.env.get("DIR")!;

function gptLoss(logits: Tensor, targets: Tensor): Tensor {
  return crossEntropy(logits.reshape([-1, GPT_CONFIG.vocabSize]), targets.reshape([-1]));
}

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 30_000 });
  try {
    const options = { nMicrobatches: 2, lossFn: gptLoss };
    if (Deno.env.get("CASE") === "save") {
      const mesh = await initDeviceMesh("cpu", [2, 2, 2], {
        meshDimNames: ["pp", "dp_shard", "tp"],
      });
      const [, dp, tp] = mesh.getCoordinate();
      const p = parallel.parallelizePipelineGPT(buildModel(), mesh, options);
      const optimizer = buildOptimizer(p.parameters());
      const [x, y] = batch(0, false, 8);
      const mine = (t: Tensor) => t.narrow(0, dp * 4, 4).contiguous();
      await p.schedule.step(p.holdsFirst ? mine(x) : undefined, { target: mine(y) });
      optimizer.step();
      await saveSharded(dir, { model: p.modules[0], optimizer });
      return { saved: holdings(p.modules[0], optimizer, tp, 2) };
    }
    const mesh = await initDeviceMesh("cpu", [4, 2], { meshDimNames: ["pp", "dp_shard"] });
    const p = parallel.parallelizePipelineGPT(buildModel(), mesh, {
      ...options,
      schedule: "gpipe",
      layersPerStage: [0, 1, 1, 0],
    });
    const optimizer = buildOptimizer(p.parameters());
    loadSharded(dir, { model: p.modules[0], optimizer });
    return { loaded: holdings(p.modules[0], optimizer, 0, 1) };
  } finally {
    await destroyProcessGroup();
  }
});
