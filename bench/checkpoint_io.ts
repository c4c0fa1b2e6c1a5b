/**
 * Checkpoint input and output at size (issue 39): a sharded save and load of an f32 state
 * (default 1 GiB, sixteen 4096×4096 weights) against `dd`'s sequential write and read of as many
 * bytes on the same disk in the same run, with the resident set's rise during each (VmHWM after
 * resetting it); then an asynchronous save's blocking time and the training steps it overlaps
 * against steps alone.
 *
 *   deno run -A --v8-flags=--expose-gc bench/checkpoint_io.ts [--mib=1024] [--dir=DIR]
 *     [--threads=2] [--batch=16] [--rounds=3] [--drop-caches]
 *
 * `--drop-caches` empties the page cache (root only) before each read, so that `dd` and the load
 * read the disk; without it both read the cache. Prints a Markdown table and a JSON line.
 * @module
 */

import { loadSharded, saveSharded } from "../src/checkpoint/mod.ts";
import { Linear } from "../src/nn/layers.ts";
import { Sequential } from "../src/nn/container.ts";
import { SGD } from "../src/optim/sgd.ts";
import { randn } from "../src/tensor/creation.ts";
import { tidy } from "../src/tensor/scope.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { peakRiseMiB } from "../tests/checkpoint/_resident.ts";
import { argValue } from "./workload.ts";
import { median, table } from "./bench_lib.ts";

const args = Deno.args;
const MIB = 2 ** 20, WIDTH = 4096, LAYER_MIB = WIDTH * WIDTH * 4 / MIB;
const mib = Number(argValue(args, "mib", "1024"));
const threads = Number(argValue(args, "threads", "2"));
const batch = Number(argValue(args, "batch", "16"));
const dropCaches = args.includes("--drop-caches");
const roundCount = Number(argValue(args, "rounds", "3"));
const root = argValue(args, "dir", "") || Deno.makeTempDirSync({ prefix: "dtrain_ckpt_io_" });
const layers = Math.max(1, Math.round(mib / LAYER_MIB));
const stateBytes = layers * LAYER_MIB * MIB;
setNumThreads(threads);

/** Runs `dd` with `args`; returns its bytes per second, read from its last stderr line. */
async function dd(ddArgs: string[]): Promise<number> {
  const out = await new Deno.Command("dd", { args: ddArgs, stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stderr);
  const copied = text.match(/(\d+) bytes .* copied, ([\d.e+-]+) s/);
  if (!out.success || copied === null) throw new Error(`dd ${ddArgs.join(" ")} failed:\n${text}`);
  return Number(copied[1]) / Number(copied[2]);
}

/** Empties the page cache when asked to, so that the next read comes from the disk. */
function coldCache(): void {
  if (!dropCaches) return;
  Deno.writeTextFileSync("/proc/sys/vm/drop_caches", "3");
}

/** `dd`'s sequential write (O_DIRECT, else through the cache with fdatasync) and read, in B/s. */
async function ddBandwidth(): Promise<{ write: number; read: number; how: string }> {
  const file = `${root}/dd.bin`, count = String(Math.max(1, Math.round(stateBytes / (16 * MIB))));
  const common = [`of=${file}`, "if=/dev/zero", "bs=16M", `count=${count}`];
  let how = "oflag=direct";
  let write: number;
  try {
    write = await dd([...common, "oflag=direct", "conv=fdatasync"]);
  } catch {
    how = "conv=fdatasync";
    write = await dd([...common, "conv=fdatasync"]);
  }
  coldCache();
  const read = await dd([`if=${file}`, "of=/dev/null", "bs=16M"]);
  Deno.removeSync(file);
  return { write, read, how };
}

function build(): Sequential {
  return new Sequential(
    ...Array.from({ length: layers }, () => new Linear(WIDTH, WIDTH, { bias: false })),
  );
}

/** One SGD step through every layer: the step the asynchronous save overlaps. */
function trainStep(model: Sequential, optimizer: SGD): number {
  const t0 = performance.now();
  tidy(() => {
    const y = model.forward(randn([batch, WIDTH]));
    const loss = y.mul(y).mean();
    loss.backward();
    optimizer.step();
    optimizer.zeroGrad();
  });
  return performance.now() - t0;
}

/** One round: dd, a save and a load, an asynchronous save alone, then one overlapping steps. */
async function round(model: Sequential, optimizer: SGD) {
  const ddRates = await ddBandwidth();
  const dir = `${root}/ckpt`;
  let t0 = performance.now();
  const saveRise = await peakRiseMiB(() => saveSharded(dir, { model }));
  const saveS = (performance.now() - t0) / 1000;
  coldCache();
  t0 = performance.now();
  const loadRise = await peakRiseMiB(() => loadSharded(dir, { model }));
  const loadS = (performance.now() - t0) / 1000;
  // With nothing to overlap: how long the background write takes alone.
  t0 = performance.now();
  await (await saveSharded(dir, { model, async: true })).done;
  const asyncAloneS = (performance.now() - t0) / 1000;
  const alone = Array.from({ length: 4 }, () => trainStep(model, optimizer));
  t0 = performance.now();
  const pending = await saveSharded(dir, { model, async: true });
  const blockedMs = performance.now() - t0;
  let committed = false;
  pending.done.then(() => committed = true);
  const overlapped: number[] = [];
  while (!committed) {
    overlapped.push(trainStep(model, optimizer));
    await new Promise((resolve) => setTimeout(resolve, 0)); // lets the commit be seen
  }
  const backgroundS = (performance.now() - t0) / 1000;
  alone.push(...Array.from({ length: 4 }, () => trainStep(model, optimizer)));
  return {
    ddWrite: ddRates.write,
    ddRead: ddRates.read,
    ddHow: ddRates.how,
    save: stateBytes / saveS,
    load: stateBytes / loadS,
    saveRise,
    loadRise,
    blockedMs,
    asyncAloneS,
    backgroundS,
    stepAlone: median(alone),
    stepOverlapped: median(overlapped),
    overlapped: overlapped.length,
  };
}

const model = build();
const optimizer = new SGD(model.parameters(), { lr: 1e-6 });
trainStep(model, optimizer); // warm-up
const rounds: Awaited<ReturnType<typeof round>>[] = [];
for (let r = 0; r < roundCount; r++) rounds.push(await round(model, optimizer));
Deno.removeSync(root, { recursive: true });

/** The median over the rounds of `pick`. */
const med = (pick: (r: typeof rounds[number]) => number) => median(rounds.map(pick));
const gbs = (bytesPerSecond: number) => (bytesPerSecond / 1e9).toFixed(2);
const all = (pick: (r: typeof rounds[number]) => number, f: (x: number) => string) =>
  rounds.map((r) => f(pick(r))).join(", ");
const ratios = {
  save: med((r) => r.save / r.ddWrite),
  load: med((r) => r.load / r.ddRead),
  step: med((r) => r.stepOverlapped / r.stepAlone),
};
console.log(
  `${stateBytes / MIB} MiB of f32, ${roundCount} rounds, ${threads} threads, ` +
    `load average ${Deno.loadavg().map((x) => x.toFixed(1)).join(" ")}; medians (every round)`,
);
console.log(table(["measure", "dtrain", "dd", "ratio (every round)"], [
  [
    "save (GB/s)",
    gbs(med((r) => r.save)),
    `${gbs(med((r) => r.ddWrite))} (${rounds[0].ddHow})`,
    `${ratios.save.toFixed(2)} (${all((r) => r.save / r.ddWrite, (x) => x.toFixed(2))})`,
  ],
  [
    `load (GB/s, ${dropCaches ? "cold cache" : "page cache"})`,
    gbs(med((r) => r.load)),
    gbs(med((r) => r.ddRead)),
    `${ratios.load.toFixed(2)} (${all((r) => r.load / r.ddRead, (x) => x.toFixed(2))})`,
  ],
  [
    "resident set rise, save / load (MiB)",
    `${med((r) => r.saveRise).toFixed(1)} / ${med((r) => r.loadRise).toFixed(1)}`,
    "",
    `${(Math.max(...rounds.map((r) => Math.max(r.saveRise, r.loadRise))) / mib).toFixed(3)} ` +
    "of the state at most",
  ],
  ["async save: blocked (ms)", med((r) => r.blockedMs).toFixed(0), "", ""],
  [
    "async save: committed after (s), alone / overlapping steps",
    `${med((r) => r.asyncAloneS).toFixed(2)} / ${med((r) => r.backgroundS).toFixed(2)}`,
    "",
    "",
  ],
  [
    "step alone / overlapping a background save (ms)",
    `${med((r) => r.stepAlone).toFixed(0)} / ${med((r) => r.stepOverlapped).toFixed(0)}`,
    "",
    `${ratios.step.toFixed(2)} (${
      all((r) => r.stepOverlapped / r.stepAlone, (x) => x.toFixed(2))
    })`,
  ],
]));
console.log(JSON.stringify({ stateMiB: stateBytes / MIB, threads, dropCaches, ratios, rounds }));
