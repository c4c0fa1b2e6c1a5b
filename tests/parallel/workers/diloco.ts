/**
 * Worker for diloco_test.ts: DiLoCo over the ranks with the pseudo-gradient sent in f32, bf16 and
 * int8, `ROUNDS` outer steps of `H` inner steps each on this rank's rows. Each run reports the
 * first θ, and per round this rank's weights before the outer step (θᵢ), after it, the residual
 * error feedback kept and the bytes sent; then the same run through `step()` alone, whose final
 * weights must be the same bits. Last, the refusals of `create`.
 * @module
 */

import { destroyProcessGroup, getRank, initProcessGroup } from "../../../src/distributed/mod.ts";
import { SGD } from "../../../src/optim/sgd.ts";
import { DiLoCo, type PseudoGradientDtype } from "../../../src/parallel/mod.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";
import { batchLoss, buildModel, buildOptimizer, paramValues, ROWS } from "./problem.ts";

/** Inner steps per outer step, and outer steps (set by the test). */
const H = envInt("H", 3), ROUNDS = envInt("ROUNDS", 2);

type Values = Record<string, number[]>;

function values(tensors: Record<string, Tensor>): Values {
  return Object.fromEntries(
    Object.entries(tensors).map(([name, t]) => [name, Array.from(t.toArray())]),
  );
}

/** A backward on this rank's rows of batch `index`; the caller steps. */
function backward(model: ReturnType<typeof buildModel>, index: number): void {
  const rank = getRank();
  tidy(() => batchLoss(model, index, rank * ROWS, (rank + 1) * ROWS).backward());
}

/** `ROUNDS` outer steps, the last inner step of each taken by hand so that θᵢ can be read. */
async function observed(dtype: PseudoGradientDtype) {
  // Each rank builds other weights: `create` must make them rank 0's.
  const model = buildModel(7000 + getRank());
  const inner = buildOptimizer(model);
  const diloco = await DiLoCo.create(model, inner, { syncEvery: H, pseudoGradientDtype: dtype });
  const initial = paramValues(model);
  const rounds = [];
  for (let round = 0; round < ROUNDS; round++) {
    const early: boolean[] = [];
    for (let step = 0; step < H - 1; step++) {
      inner.zeroGrad();
      backward(model, round * H + step);
      early.push(await diloco.step());
    }
    inner.zeroGrad();
    backward(model, round * H + H - 1);
    inner.step();
    const local = paramValues(model);
    await diloco.sync();
    const state = diloco.stateDict();
    rounds.push({
      early,
      local,
      after: paramValues(model),
      original: values(state.original),
      residual: values(state.residual),
      gradsLeft: model.parameters().filter((p) => p.grad !== null).length,
      bytes: diloco.lastSync!.bytes,
    });
  }
  diloco.dispose();
  return { initial, rounds };
}

/** The same training through `diloco.step()` alone: its final weights. */
async function throughStep(dtype: PseudoGradientDtype) {
  const model = buildModel(7000 + getRank());
  const inner = buildOptimizer(model);
  const diloco = await DiLoCo.create(model, inner, { syncEvery: H, pseudoGradientDtype: dtype });
  const synced: boolean[] = [];
  for (let index = 0; index < ROUNDS * H; index++) {
    inner.zeroGrad();
    backward(model, index);
    synced.push(await diloco.step());
  }
  diloco.dispose();
  return { synced, final: paramValues(model) };
}

/** What `create` refuses, by message. */
async function refusals(): Promise<string[]> {
  const model = buildModel(1);
  const inner = buildOptimizer(model);
  const attempts: (() => Promise<unknown>)[] = [
    () => DiLoCo.create(model, inner, { syncEvery: 0 }),
    () => DiLoCo.create(model, inner, { syncEvery: 2, errorFeedback: true }),
    () =>
      DiLoCo.create(model, inner, {
        syncEvery: 2,
        outerOptimizer: new SGD(model.parameters().slice(1), { lr: 0.7 }),
      }),
  ];
  const messages: string[] = [];
  for (const attempt of attempts) {
    await attempt().then(
      () => messages.push("accepted"),
      (e: Error) => messages.push(`${e.name}: ${e.message}`),
    );
  }
  return messages;
}

await runWorker(async () => {
  await initProcessGroup({ timeoutMs: 20_000 });
  try {
    const runs: Record<string, unknown> = {};
    for (const dtype of ["f32", "bf16", "int8"] as const) {
      runs[dtype] = { observed: await observed(dtype), throughStep: await throughStep(dtype) };
    }
    return { runs, refusals: await refusals() };
  } finally {
    await destroyProcessGroup();
  }
});
