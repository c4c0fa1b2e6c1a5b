/**
 * One rank of a planner-accuracy measurement (bench/plan_accuracy.ts): the train job's own
 * Trainer, built from the train job's flags, runs a few steps; the rank prints one JSON line with
 * its allocator peak (tensor bytes, from the start of the process and over the steady steps) and
 * its median step time. Run alone, or by the launcher once per rank.
 * @module
 */

import { parseTrainArgs, type TrainConfig } from "../src/train/config.ts";
import { Trainer } from "../src/train/trainer.ts";
import { IterTrainer } from "../src/train/iter_trainer.ts";
import { makeLayout, shardedSnapshots } from "../src/train/_layout.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { peakAllocatedBytes, resetPeakAllocatedBytes } from "../src/tensor/storage.ts";
import { destroyProcessGroup, initProcessGroup } from "../src/distributed/mod.ts";
import { groupBackend } from "../src/train/devices.ts";

/** What one rank measured. */
export interface RankMeasurement {
  /** The rank. */
  rank: number;
  /** The allocator's peak over the whole process (model, optimizer and every step). */
  peakBytes: number;
  /** The allocator's peak over the timed steps alone. */
  steadyPeakBytes: number;
  /** The median time of the timed steps, in ms. */
  stepMs: number;
}

/**
 * Trains `warmup + steps` batches of `config` on this process and measures them.
 *
 * @param config A parsed train configuration (with its snapshot somewhere that does not exist).
 * @param warmup Steps before the timed ones (the first allocates the optimizer's state).
 * @param steps Timed steps.
 */
export async function measureRank(
  config: TrainConfig,
  warmup = 2,
  steps = 3,
): Promise<RankMeasurement> {
  const worldSize = Number(Deno.env.get("WORLD_SIZE") ?? "1");
  setNumThreads(config.threads || navigator.hardwareConcurrency);
  const grouped = worldSize > 1 || shardedSnapshots(config);
  const alone = Deno.env.get("RANK") === undefined
    ? { initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 }
    : {};
  if (grouped) await initProcessGroup({ backend: groupBackend(config.device), ...alone });
  try {
    const layout = await makeLayout(config);
    if (config.dataset === "tokens") return await measureIterations(config, layout);
    const trainer = new Trainer(config, () => {}, layout);
    await trainer.init();
    trainer.model.train();
    const times: number[] = [];
    let done = 0, wholePeak = 0;
    for (const [x, y] of trainer.loader) {
      if (done === warmup) {
        wholePeak = peakAllocatedBytes();
        resetPeakAllocatedBytes();
      }
      const t0 = performance.now();
      await trainer.runBatch(x, y);
      if (done >= warmup) times.push(performance.now() - t0);
      x.dispose();
      y.dispose();
      if (++done === warmup + steps) break;
    }
    const steadyPeakBytes = peakAllocatedBytes();
    times.sort((a, b) => a - b);
    return {
      rank: trainer.rank,
      peakBytes: Math.max(wholePeak, steadyPeakBytes),
      steadyPeakBytes,
      stepMs: times[Math.floor(times.length / 2)],
    };
  } finally {
    if (grouped) await destroyProcessGroup();
  }
}

/**
 * A token job (`--dataset tokens`, nanoGPT's loop) measured through its own log: the peak over the
 * whole run (its first evaluation included) and the median of the iterations' times after the
 * first two. Give it `--max-iters`, `--eval-iters 1` and `--always-save-checkpoint false`.
 */
async function measureIterations(
  config: TrainConfig,
  layout: Awaited<ReturnType<typeof makeLayout>>,
): Promise<RankMeasurement> {
  const lines: string[] = [];
  const trainer = new IterTrainer(config, (line) => lines.push(line), layout);
  await trainer.init();
  await trainer.train();
  const times = lines.flatMap((line) => {
    const m = line.match(/^iter (\d+): .* time ([\d.]+)ms/);
    return m && Number(m[1]) >= 2 ? [Number(m[2])] : [];
  }).sort((a, b) => a - b);
  const peakBytes = peakAllocatedBytes();
  return {
    rank: trainer.rank,
    peakBytes,
    steadyPeakBytes: peakBytes,
    stepMs: times[Math.floor(times.length / 2)],
  };
}

if (import.meta.main) {
  const config = parseTrainArgs(Deno.args);
  if (config === "help") Deno.exit(2);
  const measured = await measureRank(config);
  console.log(`PLAN_MEASURED ${JSON.stringify(measured)}`);
  Deno.exit(0);
}
