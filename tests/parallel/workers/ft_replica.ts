/**
 * Worker for ft_manager_test.ts: one fault-tolerant replica training the shared MLP with AdamW
 * through a `Manager` until `STEPS` steps have committed. Every step takes the manager's share of
 * the step's samples (sample i is row i of problem.ts's batch 0). It prints one JSON line per
 * event (connected, quorum, computed, commit, abort) so the test can kill or stop it at a chosen
 * moment, and
 * last the weights and optimizer state with their SHA-256.
 * @module
 */

import { StoreClient } from "../../../src/distributed/store/client.ts";
import { AdamW } from "../../../src/optim/adamw.ts";
import { Manager } from "../../../src/parallel/ft/mod.ts";
import { flatF32, unflatten } from "../../../src/parallel/_replicas.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";
import { batchLoss, buildModel } from "./problem.ts";
import { emit, registerTraining, REPLICA, store } from "./_ft_worker.ts";

const STEPS = envInt("STEPS", 10), BATCH = envInt("BATCH", 12);
/** The tensors' bytes, in order. */
function bytesOf(tensors: Tensor[]): Uint8Array {
  const parts = tensors.map((t) => new Uint8Array((t.toArray() as Float32Array).slice().buffer));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
}

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

await runWorker(async () => {
  // The test's cues, in the store: START_KEY starts the first step once every replica is up (a
  // replica alone would otherwise train the whole run before the others start); PAUSE_KEY holds
  // the step PAUSE_AT until a replacement is up, so that it joins before the run ends.
  using cues = await StoreClient.connect({ ...store, timeoutMs: 60_000 });
  const cue = (key: string | undefined) => key ? cues.wait([key], 60_000) : Promise.resolve();
  await cue(Deno.env.get("WAIT_KEY"));
  const manager = await Manager.connect({
    store,
    replicaId: REPLICA,
    batchSize: BATCH,
    minReplicas: envInt("MIN_REPLICAS", 1),
    timeoutMs: envInt("TIMEOUT_MS", 2_000),
    joinTimeoutMs: envInt("JOIN_MS", 1_000),
    quorumTimeoutMs: 60_000,
  });
  // Each replica starts from other weights: the first quorum must make them equal.
  const model = buildModel(100 + REPLICA);
  const params = model.parameters();
  const optimizer = new AdamW(params, { lr: 0.01 });
  registerTraining(manager, model, optimizer, "optimizer");
  emit({ event: "connected", step: 0 });
  await cue(Deno.env.get("START_KEY"));
  const pauseAt = envInt("PAUSE_AT", -1);
  let healedAtStep: number | null = null; // the last step this replica healed at
  while (manager.currentStep < STEPS) {
    if (manager.currentStep === pauseAt) await cue(Deno.env.get("PAUSE_KEY"));
    const quorum = await manager.startQuorum();
    const step = manager.currentStep;
    if (manager.healed) healedAtStep = step;
    const members = quorum.members.map((m) => m.replicaId);
    emit({ event: "quorum", step, members, quorumId: quorum.quorumId, healed: manager.healed });
    const { start, end } = manager.samples();
    optimizer.zeroGrad();
    tidy(() => batchLoss(model, 0, start, end).backward());
    const flat = flatF32(params.map((p) => p.grad!));
    emit({ event: "computed", step });
    await manager.allReduce(flat);
    if (await manager.shouldCommit()) {
      unflatten(flat, params).forEach((g, i) => params[i].grad!.copy_(g));
      optimizer.step();
      emit({ event: "commit", step, start, end, members });
    } else {
      emit({ event: "abort", step, error: String(manager.errored ?? "vote") });
    }
    flat.dispose();
  }
  const state = optimizer.stateDict().state;
  const moments = Object.values(state).flatMap((s) =>
    Object.values(s).filter((v): v is Tensor => typeof v !== "number")
  );
  const weights = await sha256(bytesOf(params));
  const optimizerState = await sha256(bytesOf(moments));
  const steps = Object.values(state).map((s) => s.step);
  await manager.close();
  return {
    weights,
    optimizerState,
    optimizerSteps: steps,
    healedAtStep,
    samplesSkipped: manager.samplesSkipped,
  };
});
