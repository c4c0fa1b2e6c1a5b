/**
 * Worker for fused_qkv_test.ts, on 2 ranks as a 1-D tp mesh: GPT's plan with each PLANS entry's
 * style on `transformer.h.*.attn.c_attn` (the rest as `gptTensorParallelPlan`'s), applied by
 * `parallelizeModule` to a fresh tiny GPT (nHead from the entry): the error, or, when the plan is
 * accepted, the loss of one forward (null if none).
 * @module
 */

import {
  destroyProcessGroup,
  initDeviceMesh,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import { GPT } from "../../../src/nn/gpt.ts";
import * as parallel from "../../../src/parallel/mod.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import { runWorker } from "../../_harness/worker.ts";
import { batch, GPT_CONFIG } from "./tp_problem.ts";

/** A style for c_attn by name, and the GPT's head count and width. */
export interface PlanCase {
  label: string;
  style: "colwise" | "colwise3" | "colwise6" | "colwiseReplicate" | "rowwiseSequence";
  nHead: number;
  nEmbd: number;
}

function style(kind: PlanCase["style"]): parallel.ParallelStyle {
  switch (kind) {
    case "colwise":
      return new parallel.ColwiseParallel();
    case "colwise3":
      return new parallel.ColwiseParallel({ chunks: 3 });
    case "colwise6":
      return new parallel.ColwiseParallel({ chunks: 6 });
    case "colwiseReplicate":
      return new parallel.ColwiseParallel({ outputLayouts: new parallel.Replicate() });
    case "rowwiseSequence":
      return new parallel.RowwiseParallel({
        inputLayouts: new parallel.Replicate(),
        outputLayouts: new parallel.Shard(1),
      });
  }
}

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
  try {
    const mesh = await initDeviceMesh("cpu", [2], { meshDimNames: ["tp"] });
    const results = [];
    for (const c of JSON.parse(Deno.env.get("PLANS")!) as PlanCase[]) {
      manualSeed(11);
      const model = new GPT({ ...GPT_CONFIG, nHead: c.nHead, nEmbd: c.nEmbd });
      const plan = parallel.gptTensorParallelPlan();
      plan["transformer.h.*.attn.c_attn"] = style(c.style);
      // A c_attn left whole by its style feeds c_proj all of its input: c_proj stays whole too.
      if (c.style === "colwiseReplicate") delete plan["transformer.h.*.attn.c_proj"];
      try {
        parallel.parallelizeModule(model, mesh, plan);
      } catch (err) {
        results.push({ error: (err as Error).message, loss: null });
        continue;
      }
      let loss: number | null = null;
      try {
        loss = tidy(() => model.forward(...batch(0)).loss!.item());
      } catch {
        // A layout the attention cannot read may also fail in forward: accepted all the same.
      }
      results.push({ error: null, loss });
    }
    return { results };
  } finally {
    await destroyProcessGroup();
  }
});
