/**
 * The planner's accuracy (issue 39): for each configuration below, the plan's peak tensor bytes
 * per rank and step time against what dtrain's own Trainer then measures (bench/plan_worker.ts,
 * on 1 to 4 real ranks through the launcher), with the errors, as a Markdown table.
 *
 *     deno run -A --v8-flags=--expose-gc bench/plan_accuracy.ts [--only N,M] [--json FILE]
 *
 * `--json FILE` also writes each configuration's plan terms and measurements.
 *
 * The measured peak is the allocator's over the whole process (peakAllocatedBytes), the largest
 * over the ranks; the step time is the median of the timed steps of rank 0. The load average is
 * printed before and after: the machine may be shared, and step times follow its load.
 * @module
 */

import { parseArgs } from "node:util";
import { parseTrainArgs, type TrainConfig } from "../src/train/config.ts";
import { planConfig } from "../src/train/plan.ts";
import type { RankMeasurement } from "./plan_worker.ts";

/** Where the token configurations' random GPT-2 token data goes (written before they run). */
const SCRATCH = await Deno.makeTempDir({ prefix: "plan_accuracy_" });
const TOKENS = `--dataset tokens --data-dir ${SCRATCH}/tokens --out-dir ${SCRATCH}/out ` +
  "--max-iters 5 --eval-iters 1 --always-save-checkpoint false --gradient-accumulation-steps 1";

/** Random token ids below GPT-2's 50,257, as nanoGPT's uint16 train.bin and val.bin. */
async function writeTokens(dir: string): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  for (const [name, count] of [["train", 300_000], ["val", 30_000]] as const) {
    const ids = new Uint16Array(count).map(() => Math.floor(Math.random() * 50257));
    await Deno.writeFile(`${dir}/${name}.bin`, new Uint8Array(ids.buffer));
  }
}

/** The configurations: the train job's flags, from the small GPTs to GPT-2 124M. */
const CONFIGS: string[] = [
  "--nproc-per-node 1 --dataset fashion-mnist",
  "--nproc-per-node 2 --dataset fashion-mnist --batch-size 256",
  "--model gpt --nproc-per-node 1 --n-layer 2 --n-embd 64 --block-size 64 --batch-size 4",
  "--model gpt --nproc-per-node 1 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8",
  "--model gpt --nproc-per-node 1 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8",
  "--model gpt --nproc-per-node 1 --n-layer 6 --n-embd 384 --n-head 6 --block-size 256 --batch-size 4",
  "--model gpt --nproc-per-node 1 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8 --ac full",
  "--model gpt --nproc-per-node 1 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8 --ac selective",
  "--model gpt --nproc-per-node 1 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8 --dtype bf16",
  "--model gpt --nproc-per-node 1 --n-layer 12 --n-embd 768 --n-head 12 --block-size 128 --batch-size 2",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8",
  "--model gpt --nproc-per-node 2 --n-layer 6 --n-embd 384 --n-head 6 --block-size 256 --batch-size 4",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8 --ac full",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8 --strategy fsdp",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8 --strategy fsdp",
  "--model gpt --nproc-per-node 2 --n-layer 6 --n-embd 384 --n-head 6 --block-size 256 --batch-size 4 --strategy fsdp",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8 --strategy fsdp --ac full",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8 --tp 2",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8 --tp 2",
  "--model gpt --nproc-per-node 3 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8",
  "--model gpt --nproc-per-node 4 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8",
  "--model gpt --nproc-per-node 4 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8 --strategy fsdp",
  "--model gpt --nproc-per-node 4 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8 --strategy fsdp --dp-replicate 2",
  "--model gpt --nproc-per-node 4 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8 --tp 2",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 128 --block-size 128 --batch-size 8 --pp 2",
  "--model gpt --nproc-per-node 2 --n-layer 4 --n-embd 256 --block-size 128 --batch-size 8 --pp 2 --microbatches 4",
  // nanoGPT's token job on GPT-2's 50,304-token vocabulary (random tokens), where the logits
  // dominate: a small GPT, then GPT-2 124M at block 1024.
  `${TOKENS} --n-layer 2 --n-embd 128 --n-head 4 --block-size 128 --batch-size 4`,
  `${TOKENS} --n-layer 12 --n-embd 768 --n-head 12 --block-size 1024 --batch-size 1`,
];

/** Runs `flags` on its ranks and returns every rank's measurement. */
async function measure(flags: string[], config: TrainConfig): Promise<RankMeasurement[]> {
  const worker = new URL("./plan_worker.ts", import.meta.url).pathname;
  const launcher = new URL("../src/launch/main.ts", import.meta.url).pathname;
  const ranks = config.nprocPerNode;
  const args = ranks === 1
    ? ["run", "-A", "--v8-flags=--expose-gc", worker, ...flags]
    : ["run", "-A", launcher, "--nproc-per-node", String(ranks), worker, ...flags];
  const { success, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args,
    env: { DTRAIN_TOKEN: "plan-accuracy", DENO_V8_FLAGS: "--expose-gc" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
  if (!success) throw new Error(`${flags.join(" ")} failed:\n${text.slice(-2000)}`);
  return [...text.matchAll(/PLAN_MEASURED (\{.*\})/g)].map((m) => JSON.parse(m[1]));
}

function loadAverage(): string {
  try {
    return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  } catch {
    return "?";
  }
}

const pct = (predicted: number, measured: number) => (predicted / measured - 1) * 100;
const mib = (n: number) => (n / 2 ** 20).toFixed(2);

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { only: { type: "string" }, json: { type: "string" } },
  });
  const only = values.only?.split(",").map(Number);
  const chosen = CONFIGS.map((c, i) => [i, c] as const).filter(([i]) => !only || only.includes(i));
  console.log(`load average before: ${loadAverage()} (${navigator.hardwareConcurrency} cores)`);
  console.log(
    "| # | configuration | ranks | peak predicted MiB | peak measured MiB | error | " +
      "step predicted ms | step measured ms | error |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  await writeTokens(`${SCRATCH}/tokens`);
  const errors: { memory: number; time: number }[] = [];
  const rows: unknown[] = [];
  for (const [i, line] of chosen) {
    const flags = [...line.split(" "), "--snapshot", `${SCRATCH}/s${i}`];
    const config = parseTrainArgs(flags) as TrainConfig;
    const plan = await planConfig(config);
    const ranks = await measure(flags, config);
    const peak = Math.max(...ranks.map((r) => r.peakBytes));
    const stepMs = ranks.find((r) => r.rank === 0)!.stepMs;
    const predictedMs = plan.time!.seconds * 1000;
    const e = { memory: pct(plan.memory.peak, peak), time: pct(predictedMs, stepMs) };
    errors.push(e);
    rows.push({ line, plan, ranks });
    console.log(
      `| ${i} | \`${line}\` | ${config.nprocPerNode} | ${mib(plan.memory.peak)} | ${mib(peak)} | ` +
        `${e.memory.toFixed(1)}% | ${predictedMs.toFixed(1)} | ${stepMs.toFixed(1)} | ` +
        `${e.time.toFixed(1)}% |`,
    );
  }
  const within = (xs: number[], aim: number) => xs.filter((x) => Math.abs(x) <= aim).length;
  const m = errors.map((e) => e.memory), t = errors.map((e) => e.time);
  console.log(
    `\npeak memory within ±5%: ${within(m, 5)}/${m.length} (largest |error| ` +
      `${Math.max(...m.map(Math.abs)).toFixed(1)}%); step time within ±15%: ${within(t, 15)}/` +
      `${t.length} (largest |error| ${Math.max(...t.map(Math.abs)).toFixed(1)}%)`,
  );
  console.log(`load average after: ${loadAverage()}`);
  if (values.json) await Deno.writeTextFile(values.json, JSON.stringify(rows, null, 1));
  await Deno.remove(SCRATCH, { recursive: true });
}
