/**
 * `deno task train`: the main job. With `--nproc-per-node N > 1` (the default is 2) or several
 * nodes it starts the launcher, which runs this same file once per rank; each rank then trains
 * with DDP. With `--nproc-per-node 1` it trains in this process.
 *
 * Env DTRAIN_WEIGHTS_DUMP=DIR makes every rank write its final weights to
 * DIR/rank<RANK>.safetensors, so that a test can check that all ranks, on every node, agree.
 * @module
 */

import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { setNumThreads } from "../tensor/threads.ts";
import { CheckpointError, save } from "../checkpoint/mod.ts";
import { destroyProcessGroup, initProcessGroup } from "../dist/mod.ts";
import { launch } from "../launch/launcher.ts";
import { startProfile } from "../profile/tracer.ts";
import { ConfigError, parseTrainArgs, type TrainConfig, USAGE } from "./config.ts";
import { checkSnapshot } from "./snapshot.ts";
import { Trainer } from "./trainer.ts";

async function runWorker(config: TrainConfig): Promise<void> {
  const worldSize = Number(Deno.env.get("WORLD_SIZE") ?? "1");
  const threads = config.threads || Number(Deno.env.get("DTRAIN_NUM_THREADS") ?? 0) ||
    navigator.hardwareConcurrency;
  setNumThreads(threads);
  if (worldSize > 1) await initProcessGroup({ backend: "gloo" });
  try {
    const trainer = new Trainer(config);
    await trainer.init();
    const result = await trainer.train();
    const dump = Deno.env.get("DTRAIN_WEIGHTS_DUMP");
    if (dump) save(`${dump}/rank${trainer.rank}.safetensors`, trainer.model.stateDict());
    if (trainer.rank === 0) {
      const acc = result.testAccuracy === null
        ? ""
        : `, test accuracy ${(result.testAccuracy * 100).toFixed(2)}%`;
      const loss = result.epochsHere > 0
        ? `loss ${result.lastLoss.toFixed(4)}`
        : `nothing left to train (the snapshot has ${result.epochsRun}/${config.epochs} epochs; ` +
          `raise --epochs or remove ${config.snapshot})`;
      console.log(`done: ${result.epochsRun} epochs, ${loss}${acc}`);
    }
  } finally {
    if (worldSize > 1) await destroyProcessGroup();
  }
}

/** Parses the command line and runs the job; resolves to the process exit code. */
export async function main(args: string[]): Promise<number> {
  let config: TrainConfig | "help";
  try {
    config = parseTrainArgs(args);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`train: ${error.message}\n(see --help)`);
    return 2;
  }
  if (config === "help") {
    console.log(USAGE);
    return 0;
  }
  if (config.device !== "cpu") {
    console.error(`train: device "${config.device}" is not available in this build (only "cpu")`);
    return 2;
  }
  const launched = Deno.env.get("RANK") !== undefined;
  // The workers start their timelines from the environment; a single process starts its own.
  if (config.profile && !launched) {
    Deno.env.set("DTRAIN_PROFILE", config.profile);
    if (config.nprocPerNode === 1 && config.nnodes === 1) startProfile(config.profile);
  }
  try {
    // A bad snapshot is a bad input, refused before any process starts; ranks check it again.
    if (!launched && existsSync(config.snapshot)) checkSnapshot(config.snapshot);
  } catch (error) {
    if (!(error instanceof CheckpointError)) throw error;
    console.error(`train: ${error.message}`);
    return 2;
  }
  if (!launched && (config.nprocPerNode > 1 || config.nnodes > 1)) {
    try {
      return await launch({
        nprocPerNode: config.nprocPerNode,
        nnodes: config.nnodes,
        minNodes: config.minNodes || config.nnodes,
        nodeRank: config.nodeRank,
        masterAddr: config.masterAddr,
        masterPort: config.masterPort,
        maxRestarts: config.maxRestarts,
        logDir: config.logDir,
        script: fileURLToPath(import.meta.url),
        scriptArgs: args,
      });
    } catch (error) {
      // The launcher's refusals (no DTRAIN_TOKEN, a busy port) are messages, as in src/launch/main.ts.
      console.error(`train: ${(error as Error).message}`);
      return 1;
    }
  }
  try {
    await runWorker(config);
  } catch (error) {
    if (!(error instanceof CheckpointError)) throw error;
    console.error(`train: ${error.message}`);
    return 2;
  }
  return 0;
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (error) {
    console.error(`train: ${(error as Error).stack ?? error}`);
    Deno.exit(1);
  }
}
