/**
 * What the fault-tolerant replica workers (ft_replica.ts, ft_diloco.ts) share: the replica's id
 * and store from the environment, its events on stdout, and the state a healing peer receives.
 * @module
 */

import type { Module } from "../../../src/nn/module.ts";
import type { AdamW } from "../../../src/optim/adamw.ts";
import type { Manager } from "../../../src/parallel/mod.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { envInt } from "../../_harness/worker.ts";

/** This replica's id (REPLICA). */
export const REPLICA: number = envInt("REPLICA", 0);

/** The store the test hosts (FT_PORT, FT_TOKEN). */
export const store: { hostname: string; port: number; token: string } = {
  hostname: "127.0.0.1",
  port: envInt("FT_PORT", 0),
  token: Deno.env.get("FT_TOKEN")!,
};

/** Prints one event, tagged with the replica, for the test to read. */
export function emit(event: Record<string, unknown>): void {
  console.log(JSON.stringify({ replica: REPLICA, ...event }));
}

/** Registers the model (as "model") and its optimizer (as `optimizerKey`) for healing. */
export function registerTraining(
  manager: Manager,
  model: Module,
  optimizer: AdamW,
  optimizerKey: string,
): void {
  manager.registerState("model", {
    stateDict: () => model.stateDict(),
    loadStateDict: (s) => model.loadStateDict(s as Record<string, Tensor>),
  });
  manager.registerState(optimizerKey, {
    stateDict: () => optimizer.stateDict(),
    loadStateDict: (s) => optimizer.loadStateDict(s as ReturnType<AdamW["stateDict"]>),
  });
}
