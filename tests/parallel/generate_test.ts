// GPT.generate (with its KV cache) on 2 real rank processes: under tensor parallelism (each rank
// caches its own heads' keys and values) and under FSDP (the cache passes through the hooked
// forwards of the blocks and the root), every rank samples the tokens of one process under the
// same seed, past the block size.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { manualSeed } from "../../src/tensor/random.ts";
import { PROMPT, sampleTokens, sharpModel } from "./workers/generate_problem.ts";

const worker = new URL("./workers/generate.ts", import.meta.url);

for (const mode of ["tp", "fsdp"]) {
  Deno.test(`GPT.generate on 2 ranks (${mode}) samples one process's tokens under the same seed`, async () => {
    const marker = crypto.randomUUID();
    const runs = await runRanks({
      worker,
      worldSize: 2,
      timeoutMs: 90_000,
      env: () => ({ MODE: mode, ...markerEnv(marker) }),
    });
    const left = markedProcesses(marker);
    assert.deepEqual(left, [], `left behind: ${describe(left)}`);
    assertAllOk(runs);
    const model = sharpModel().eval();
    manualSeed(3);
    const want = sampleTokens(model, PROMPT);
    assert.equal(want.length, 2 * 23);
    for (const run of runs) assert.deepEqual(run.result!.tokens, want, `rank ${run.rank}`);
  });
}
