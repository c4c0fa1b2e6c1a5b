/**
 * Worker for generate_test.ts: the tp_problem tiny GPT, parallelized as MODE says ("tp": the GPT
 * plan with gathered logits over every rank; "fsdp": fullyShard per block and on the root), in
 * eval mode, continues a 2-row prompt past its block size under a fixed seed; returns the tokens.
 * @module
 */

import {
  destroyProcessGroup,
  getWorldSize,
  initDeviceMesh,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import type { GPT } from "../../../src/nn/gpt.ts";
import { fullyShard } from "../../../src/parallel/fsdp/fully_shard.ts";
import { parallelizeGPT } from "../../../src/parallel/tensor_parallel/gpt_plan.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { runWorker } from "../../_harness/worker.ts";
import { PROMPT, sampleTokens, sharpModel } from "./generate_problem.ts";

await runWorker(async () => {
  await initProcessGroup({
    backend: "gloo",
    timeoutMs: Number(Deno.env.get("TEST_TIMEOUT_MS") ?? 20_000),
  });
  try {
    const mode = Deno.env.get("MODE");
    let model: GPT;
    if (mode === "tp") {
      const mesh = await initDeviceMesh("cpu", [getWorldSize()], { meshDimNames: ["tp"] });
      model = parallelizeGPT(sharpModel(), mesh);
    } else {
      model = sharpModel();
      for (const block of model.transformer.h) fullyShard(block);
      fullyShard(model);
    }
    manualSeed(3);
    return { tokens: sampleTokens(model.eval(), PROMPT) };
  } finally {
    await destroyProcessGroup();
  }
});
