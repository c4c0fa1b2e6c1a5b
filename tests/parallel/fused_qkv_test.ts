// A tensor-parallel plan that splits GPT's fused q|k|v projection (attn.c_attn) in a way the
// attention cannot read is refused at parallelizeModule, on 2 real rank processes, naming the
// module and the fix: a plain ColwiseParallel() (rank 0 would hold all of q and half of k, which
// the attention split into three and trained on, silently), chunks other than 3, a
// sequence-sharded output, and heads cut in half (nHead 3 on 2 ranks). ColwiseParallel({ chunks: 3 })
// and a gathered (Replicate) output are accepted, and their loss is one process's.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { manualSeed } from "../../src/tensor/random.ts";
import { GPT } from "../../src/nn/gpt.ts";
import { tidy } from "../../src/tensor/scope.ts";
import { batch, GPT_CONFIG } from "./workers/tp_problem.ts";
import type { PlanCase } from "./workers/fused_qkv.ts";

const worker = new URL("./workers/fused_qkv.ts", import.meta.url);

const NAME = "transformer.h.0.attn.c_attn";
const FIX = /use ColwiseParallel\(\{ chunks: 3 \}\) \(each rank holds its heads' q, k and v\)/;

const PLANS: (PlanCase & { refused: RegExp | null })[] = [
  {
    label: "ColwiseParallel()",
    style: "colwise",
    nHead: 4,
    nEmbd: 32,
    refused: new RegExp(
      `^parallelizeModule: ${NAME} is GPT's fused q\\|k\\|v projection \\[96,32\\]; ` +
        "ColwiseParallel\\(\\) gives rank 0 all of q and 16 of k's 32 features, which the " +
        "attention would split into q, k and v as if each were 16 features of the same heads; " +
        FIX.source,
    ),
  },
  {
    label: "ColwiseParallel({ chunks: 6 })",
    style: "colwise6",
    nHead: 4,
    nEmbd: 32,
    refused: new RegExp(
      `${NAME} .* ColwiseParallel\\(\\{ chunks: 6 \\}\\) gives rank 0 16 of q's 32 features ` +
        `and 16 of k's 32 features and 16 of v's 32 features, .*; ${FIX.source}`,
    ),
  },
  {
    label: "RowwiseParallel to Shard(1)",
    style: "rowwiseSequence",
    nHead: 4,
    nEmbd: 32,
    refused: new RegExp(
      `${NAME} is GPT's fused q\\|k\\|v projection; its output is Shard\\(dim=1\\) on each rank, ` +
        `but the attention reads every position's whole q, k and v from it; ${FIX.source}`,
    ),
  },
  {
    label: "ColwiseParallel({ chunks: 3 }) with nHead 3",
    style: "colwise3",
    nHead: 3,
    nEmbd: 24,
    refused: new RegExp(
      `${NAME} splits each of q, k and v \\(24 features, heads of 8\\) into 2 parts of 12, not ` +
        "whole heads: nHead 3 must be divisible by the tensor-parallel size 2",
    ),
  },
  {
    label: "ColwiseParallel({ chunks: 3 })",
    style: "colwise3",
    nHead: 4,
    nEmbd: 32,
    refused: null,
  },
  {
    label: "ColwiseParallel to Replicate",
    style: "colwiseReplicate",
    nHead: 4,
    nEmbd: 32,
    refused: null,
  },
];

Deno.test("parallelizeModule refuses a TP plan that splits GPT's fused q|k|v wrongly, naming c_attn and ColwiseParallel({ chunks: 3 }); the layouts the attention reads train as one process", async () => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: 2,
    timeoutMs: 90_000,
    env: () => ({ PLANS: JSON.stringify(PLANS), ...markerEnv(marker) }),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  manualSeed(11);
  const want = tidy(() => new GPT(GPT_CONFIG).forward(...batch(0)).loss!.item());
  for (const run of runs) {
    const { results } = run.result as { results: { error: string | null; loss: number | null }[] };
    for (const [i, plan] of PLANS.entries()) {
      const { error, loss } = results[i], what = `rank ${run.rank}, ${plan.label}`;
      if (plan.refused !== null) {
        assert.match(error ?? `accepted (loss ${loss}, one process: ${want})`, plan.refused, what);
      } else {
        assert.equal(error, null, what);
        assert.ok(Math.abs(loss! - want) <= 1e-5 * want, `${what}: loss ${loss} vs ${want}`);
      }
    }
  }
});
