/**
 * Worker for ft_diloco_test.ts: one fault-tolerant DiLoCo replica (H = `H` inner AdamW steps per
 * outer step, syncs through a `Manager`) until `STEPS` outer steps have committed. Inner step i
 * of an outer step takes the i-th of H equal slices of the manager's share. It prints the same
 * events as ft_replica.ts (a commit carries the whole share), and last θ and the last step it
 * healed at.
 * @module
 */

import { StoreClient } from "../../../src/distributed/store/client.ts";
import { AdamW } from "../../../src/optim/adamw.ts";
import { DiLoCo, Manager } from "../../../src/parallel/mod.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";
import { batchLoss, buildModel } from "./problem.ts";
import { emit, registerTraining, REPLICA, store } from "./_ft_worker.ts";

const STEPS = envInt("STEPS", 4), H = envInt("H", 2);
await runWorker(async () => {
  // The test's cues, as in ft_replica.ts: WAIT_KEY holds a replacement back, START_KEY the first
  // step, PAUSE_KEY the outer step PAUSE_AT (until the replacement is up).
  using cues = await StoreClient.connect({ ...store, timeoutMs: 60_000 });
  const cue = (key: string | undefined) => key ? cues.wait([key], 60_000) : Promise.resolve();
  await cue(Deno.env.get("WAIT_KEY"));
  const manager = await Manager.connect({
    store,
    replicaId: REPLICA,
    batchSize: envInt("BATCH", 12),
    timeoutMs: envInt("TIMEOUT_MS", 2_000),
    joinTimeoutMs: envInt("JOIN_MS", 1_000),
  });
  const model = buildModel(100 + REPLICA);
  const inner = new AdamW(model.parameters(), { lr: 0.01 });
  registerTraining(manager, model, inner, "inner");
  emit({ event: "connected", step: 0 });
  await cue(Deno.env.get("START_KEY"));
  const diloco = await DiLoCo.create(model, inner, { syncEvery: H, manager });
  const pauseAt = envInt("PAUSE_AT", -1);
  let healedAtStep: number | null = null; // the last step this replica healed at
  while (manager.currentStep < STEPS) {
    if (manager.currentStep === pauseAt) await cue(Deno.env.get("PAUSE_KEY"));
    const step = manager.currentStep;
    if (manager.healed) healedAtStep = step;
    const members = manager.quorum!.members.map((m) => m.replicaId);
    const { start, end } = manager.samples();
    const slice = (end - start) / H;
    for (let i = 0; i < H; i++) {
      inner.zeroGrad();
      tidy(() => batchLoss(model, 0, start + i * slice, start + (i + 1) * slice).backward());
      emit({ event: "computed", step, inner: i });
      await diloco.step();
    }
    const committed = manager.currentStep > step;
    emit({ event: committed ? "commit" : "abort", step, start, end, members });
  }
  const theta = Object.values(diloco.stateDict().original).map((t) => Array.from(t.toArray()));
  diloco.dispose();
  await manager.close();
  return { theta, healedAtStep };
});
