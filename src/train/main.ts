/**
 * `deno task train`: the main job. With `--nproc-per-node N > 1` (the default is 2) or several
 * nodes it starts the launcher, which runs this same file once per rank; each rank then trains
 * with DDP, or with FSDP (`--strategy fsdp`). With `--nproc-per-node 1` it trains in this process.
 *
 * Env DTRAIN_WEIGHTS_DUMP=DIR makes every rank write its final weights (under FSDP the whole
 * model, gathered) to DIR/rank<RANK>.safetensors, so that a test can check that all ranks, on
 * every node, agree.
 * @module
 */

import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { setNumThreads } from "../tensor/threads.ts";
import { FAMILIES } from "../tensor/device/mod.ts";
import { deviceProblem, groupBackend } from "./devices.ts";
import { CheckpointError, save } from "../checkpoint/mod.ts";
import {
  destroyProcessGroup,
  diagnoseError,
  DistError,
  initProcessGroup,
} from "../distributed/mod.ts";
import { launch } from "../launch/launcher.ts";
import { holdDumpSignal } from "../launch/dump_signal.ts";
import { UnsafePathError } from "../io/private_files.ts";
import { runnable } from "../launch/supervisor.ts";
import { EXIT_STOPPED } from "../launch/stop_request.ts";
import { startProfile } from "../profile/tracer.ts";
import { ConfigError, parseTrainArgs, type TrainConfig, USAGE } from "./config.ts";
import {
  availableMemory,
  formatPlan,
  planConfig,
  planSync,
  resolveAutoBatch,
  unfitReason,
} from "./plan.ts";
import { buildModel, buildOptimizer, loadTask, taskShape } from "./model.ts";
import { checkSamplerFits, checkSnapshot, snapshotMismatch } from "./snapshot.ts";
import { progressFile } from "./_snapshots.ts";
import { DivergedError } from "./_finite.ts";
import {
  checkShardedSnapshot,
  checkSnapshotKind,
  hasShardedSnapshot,
  shardedSnapshotMismatch,
} from "./sharded_snapshot.ts";
import { Trainer, type TrainResult } from "./trainer.ts";
import { finalWeights, wholeGPT } from "./_final_weights.ts";
import { finishTokensRun, refuseBadTokenData } from "./_tokens_job.ts";
import { IterTrainer } from "./iter_trainer.ts";
import { checkVocabFits, makeLayout, shardedSnapshots } from "./_layout.ts";
import type { GPT } from "../nn/gpt.ts";
import { TextDataset } from "../data/text.ts";
import { tensor } from "../tensor/creation.ts";
import { manualSeed } from "../tensor/random.ts";

/** 300 bytes the trained model writes after a newline (temperature 0.8, top 40), as text. */
function sampleText(model: GPT): string {
  manualSeed(1);
  model.eval();
  // On the model's device, as PyTorch's generate wants its idx.
  const device = model.parameters()[0].device;
  const prompt = tensor(TextDataset.encode("\n"), [1, 1], { dtype: "i32", device });
  const tokens = model.generate(prompt, 300, { temperature: 0.8, topK: 40 }).toArray();
  return TextDataset.decode(tokens.subarray(1));
}

/** The last line of a run. */
function doneLine(config: TrainConfig, result: TrainResult): string {
  const acc = result.testAccuracy !== null
    ? `, test accuracy ${(result.testAccuracy * 100).toFixed(2)}%`
    : result.validationLoss !== null
    ? `, validation loss ${result.validationLoss.toFixed(4)}`
    : "";
  const loss = `loss ${result.lastLoss.toFixed(4)}`;
  if (result.stoppedByMaxSteps) {
    const what = result.stepsHere > 0
      ? loss
      : `nothing left to train (the snapshot is at step ${result.step}; raise --max-steps)`;
    return `done: ${result.epochsRun} epochs and step ${result.step} (--max-steps ` +
      `${config.maxSteps}), ${what}${acc}`;
  }
  const what = result.stepsHere > 0
    ? loss
    : `nothing left to train (the snapshot has ${result.epochsRun}/${config.epochs} epochs; ` +
      `raise --epochs or remove ${config.snapshot})`;
  return `done: ${result.epochsRun} epochs, ${what}${acc}`;
}

/**
 * A snapshot that cannot resume this configuration, refused before any process starts: its
 * metadata and tensor names, the model's tensors and shapes, then the optimizer's state.
 * @throws CheckpointError naming the file and what differs.
 */
function refuseUnfitSnapshot(config: TrainConfig): void {
  const { snapshot } = config;
  const strategy = shardedSnapshots(config) ? "fsdp" : "ddp";
  checkSnapshotKind(snapshot, strategy);
  const fsdp = strategy === "fsdp";
  if (fsdp && !hasShardedSnapshot(snapshot)) return;
  const progress = fsdp ? checkShardedSnapshot(snapshot).progress : checkSnapshot(snapshot);
  // Only a mid-epoch snapshot's position needs the data, loaded for it alone.
  const samples = progress.sampler.position === undefined
    ? Infinity
    : loadTask(config).train.length;
  checkSamplerFits(progressFile(snapshot, strategy), progress, samples);
  const model = buildModel(config, taskShape(config));
  const optimizer = buildOptimizer(config, model);
  const mismatch = (fsdp ? shardedSnapshotMismatch : snapshotMismatch)(snapshot, model, optimizer);
  if (mismatch !== null) throw new CheckpointError(snapshot, mismatch);
}

/** Trains this rank; resolves to its exit code (EXIT_STOPPED when the launcher stopped it). */
async function runWorker(config: TrainConfig): Promise<number> {
  const worldSize = Number(Deno.env.get("WORLD_SIZE") ?? "1");
  const threads = config.threads || Number(Deno.env.get("DTRAIN_NUM_THREADS") ?? 0) ||
    navigator.hardwareConcurrency;
  setNumThreads(threads);
  // FSDP needs a process group even alone; unlaunched, a group of one on a port of its own.
  const grouped = worldSize > 1 || shardedSnapshots(config);
  const alone = Deno.env.get("RANK") === undefined
    ? { initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 }
    : {};
  // "auto" on an accelerator: its device collectives for the model, Gloo for the CPU tensors.
  if (grouped) await initProcessGroup({ backend: groupBackend(config.device), ...alone });
  try {
    // The N-D layout's mesh, once per job (train/_layout.ts).
    const layout = await makeLayout(config);
    if (config.dataset === "tokens") {
      const trainer = new IterTrainer(config, console.log, layout);
      await trainer.init();
      return await finishTokensRun(trainer, await trainer.train());
    }
    const trainer = new Trainer(config, console.log, layout);
    await trainer.init();
    const result = await trainer.train();
    if (trainer.stoppedOnRequest) {
      if (trainer.rank === 0) {
        console.log(`stopped by the launcher at step ${result.step}; the snapshot resumes the run`);
      }
      return EXIT_STOPPED;
    }
    const weights = await finalWeights(trainer);
    const dump = Deno.env.get("DTRAIN_WEIGHTS_DUMP");
    if (dump) save(`${dump}/rank${trainer.rank}.safetensors`, weights);
    if (trainer.rank === 0) {
      console.log(doneLine(config, result));
      if (config.model === "gpt") {
        const gpt = wholeGPT(trainer, weights);
        console.log(`sample:\n${sampleText(gpt)}`);
      }
    }
    return 0;
  } catch (err) {
    // A blocking collective's failure (tensor parallelism) waits for its diagnosis here.
    throw await diagnoseError(err);
  } finally {
    if (grouped) await destroyProcessGroup();
  }
}

/** Parses the command line and runs the job; resolves to the process exit code. */
export async function main(args: string[]): Promise<number> {
  let config: TrainConfig | "help";
  const notes: string[] = [];
  const launched = Deno.env.get("RANK") !== undefined;
  // --dry-run prints the plan (plan.ts) and starts nothing; the ranks get the resolved arguments.
  const dryRun = args.includes("--dry-run");
  args = args.filter((arg) => arg !== "--dry-run");
  try {
    args = resolveAutoBatch(args, notes);
    config = parseTrainArgs(args, notes);
    // The launcher's workers parse the same arguments: the notes are printed once, here.
    if (!launched) { for (const note of notes) console.log(`train: ${note}`); }
    if (config !== "help" && !launched) {
      refuseBadTokenData(config);
      checkVocabFits(config.tp, taskShape(config).outputs);
    }
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`train: ${error.message}\n(see --help)`);
    return 2;
  }
  if (config === "help") {
    console.log(USAGE);
    return 0;
  }
  const problem = deviceProblem(config.device, config.nprocPerNode);
  if (problem !== null) {
    console.error(`train: ${problem}`);
    return 2;
  }
  if (dryRun) {
    console.log(formatPlan(config, await planConfig(config), availableMemory()));
    return 0;
  }
  // A plan whose ranks on this node do not fit its memory is refused before any starts (host
  // memory: the cpu device's tensors live there; an elastic job's world size is not known yet).
  const elastic = config.minNodes !== undefined && config.minNodes !== config.nnodes;
  const unfit = !launched && FAMILIES[config.device].hostMemory && !elastic
    ? unfitReason(planSync(config), availableMemory())
    : null;
  if (unfit !== null) {
    console.error(`train: ${unfit}`);
    return 2;
  }
  // The workers start their timelines from the environment; a single process starts its own.
  if (config.profile && !launched) {
    Deno.env.set("DTRAIN_PROFILE", config.profile);
    if (config.nprocPerNode === 1 && config.nnodes === 1) startProfile(config.profile);
  }
  try {
    // A bad snapshot is a bad input, refused before any process starts; ranks check it again.
    // An iteration-based run resumes only with --init-from resume (scratch overwrites).
    const resumes = config.dataset !== "tokens" || config.initFrom === "resume";
    if (!launched && resumes && existsSync(config.snapshot)) refuseUnfitSnapshot(config);
    if (!launched && config.dataset === "tokens" && config.initFrom === "resume") {
      if (!existsSync(config.snapshot)) {
        throw new CheckpointError(config.snapshot, "--init-from resume: there is no snapshot");
      }
    }
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
        standalone: config.standalone,
        maxRestarts: config.maxRestarts,
        logDir: config.logDir || join(dirname(config.snapshot), "logs"),
        script: runnable(import.meta.url),
        scriptArgs: args,
      });
    } catch (error) {
      // The launcher's refusals (no DTRAIN_TOKEN, a busy port) are messages, as in src/launch/main.ts.
      console.error(`train: ${(error as Error).message}`);
      return error instanceof DistError && error.code === "invalid" ? 2 : 1;
    }
  }
  try {
    return await runWorker(config);
  } catch (error) {
    const known = error instanceof CheckpointError || error instanceof DivergedError ||
      error instanceof ConfigError || error instanceof UnsafePathError;
    if (!known) throw error;
    console.error(`train: ${error.message}`);
    // A diverged run is a failure of the run, a bad snapshot a bad input.
    return error instanceof DivergedError ? 1 : 2;
  }
}

if (import.meta.main) {
  // The job's first process may become the launcher: SIGUSR1 is held from Deno's inspector before
  // anything runs (this may re-execute the process; its ranks inherit the hold).
  if (Deno.env.get("RANK") === undefined) holdDumpSignal();
  try {
    Deno.exit(await main(Deno.args));
  } catch (error) {
    console.error(`train: ${(error as Error).stack ?? error}`);
    Deno.exit(1);
  }
}
