// FSDP against PyTorch: a GPT trained with fullyShard on 2 and on 3 real rank processes ends with
// a fullStateDict equal to one PyTorch process trained on the same global batches
// (tests/fixtures/fsdp_gpt*.{json,safetensors}, made by gen_fsdp.py from nanoGPT's model.py),
// plainly and with gradient clipping; the ranks' mean losses and the global norms match too.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { loadReference, torchState } from "./workers/fsdp_torch.ts";

const worker = new URL("./workers/fsdp_torch.ts", import.meta.url);
/** The bar for FSDP on 2 and 3 ranks against one PyTorch process. */
const TOLERANCE = 1e-5;

interface RunResult {
  name: string;
  losses: number[];
  norms: number[];
  final: Record<string, number[]>;
  fullCount: number;
  localCount: number;
}

/**
 * The largest per-tensor relative error ‖got − want‖ / ‖want‖, failing above TOLERANCE. Per
 * tensor, not per element, as in fsdp_test.ts: AdamW turns last-bit differences of near-zero
 * gradients into steps of the learning rate's size, which only a norm puts in proportion.
 */
function assertStateClose(
  got: Record<string, number[]>,
  want: Record<string, Float32Array>,
  what: string,
): { worst: number; at: string } {
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${what}: names`);
  let worst = 0, at = "";
  for (const [name, expected] of Object.entries(want)) {
    const actual = got[name];
    assert.equal(actual.length, expected.length, `${what}: ${name} has ${actual.length} elements`);
    let diff = 0, norm = 0;
    for (let i = 0; i < expected.length; i++) {
      diff += (actual[i] - expected[i]) ** 2;
      norm += expected[i] ** 2;
    }
    const err = Math.sqrt(diff / Math.max(norm, 1e-12));
    assert.ok(err <= TOLERANCE, `${what}: ${name} has relative error ${err}, over ${TOLERANCE}`);
    if (err >= worst) [worst, at] = [err, name];
  }
  return { worst, at };
}

for (const size of [2, 3]) {
  Deno.test(`fullyShard GPT on ${size} ranks ends equal to one PyTorch process on the same global batches (plain and clipGradNorm, relative error <= 1e-5)`, async () => {
    const ref = loadReference();
    const marker = crypto.randomUUID();
    const ranks = await runRanks({
      worker,
      worldSize: size,
      timeoutMs: 90_000,
      env: markerEnv(marker),
    });
    const left = markedProcesses(marker);
    assert.deepEqual(left, [], `left behind: ${describe(left)}`);
    assertAllOk(ranks);
    for (const [i, reference] of ref.runs.entries()) {
      const want = torchState(reference.final);
      const results = ranks.map((r) => (r.result!.runs as RunResult[])[i]);
      // Equal per-rank batches: the mean of the ranks' mean losses is the global mean loss.
      reference.losses.forEach((loss, step) => {
        const mean = results.reduce((s, r) => s + r.losses[step], 0) / size;
        assert.ok(
          Math.abs(mean - loss) <= TOLERANCE * loss,
          `${reference.name}, step ${step}: mean rank loss ${mean}, PyTorch ${loss}`,
        );
      });
      for (const [rank, result] of results.entries()) {
        const what = `${reference.name}, rank ${rank} of ${size}`;
        assert.equal(result.norms.length, reference.gradNorms.length, `${what}: norms`);
        reference.gradNorms.forEach((n, step) => {
          const got = result.norms[step];
          assert.ok(
            Math.abs(got - n) <= TOLERANCE * n,
            `${what}: norm ${step} ${got}, PyTorch ${n}`,
          );
        });
        // Sharded for real: each rank holds about 1/N of the parameters.
        const { fullCount, localCount } = result;
        assert.ok(localCount <= fullCount / size + 64, `${what}: ${localCount} of ${fullCount}`);
        const { worst, at } = assertStateClose(result.final, want, what);
        if (rank === 0) {
          console.log(
            `${size} ranks, ${reference.name}: worst relative error ${
              worst.toExponential(2)
            } (${at})`,
          );
        }
      }
    }
  });
}
