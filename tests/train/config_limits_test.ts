// The train job's limits on its command line: sizes whose memory exceeds the machine, numbers
// not written in decimal and `--nnodes MIN:MAX` with MIN < 1 exit 2 naming the field, before
// anything is created; the parameter count behind the memory check is the real models'.
import assert from "node:assert/strict";
import { withTempDir } from "../_harness/processes.ts";
import { DEFAULTS, parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";
import { exceedsMemory, parameterCount } from "../../src/train/footprint.ts";
import { buildModel, DATASET_SHAPES } from "../../src/train/model.ts";
import { train } from "./_train.ts";

const GIB = 1024 ** 3;
const memory = Deno.systemMemoryInfo().total;
const shownMemory = `${(memory / GIB).toPrecision(3)} GiB`;

const CASES: { args: string[]; message: RegExp }[] = [
  {
    args: ["--hidden", "1e12"],
    message: new RegExp(
      "^train: --hidden: --hidden 1000000000000 gives the mlp 7\\.95e\\+14 parameters: with their " +
        "gradients and sgd state about 16\\.9 PiB on this machine \\(2 process\\(es\\) holding " +
        `the whole model\\), more than its ${shownMemory.replace(".", "\\.")} of memory$`,
    ),
  },
  {
    args: ["--model", "gpt", "--n-embd", "1048576", "--n-head", "1", "--strategy", "fsdp"],
    message:
      /^train: --n-embd: --n-layer 4 --n-embd 1048576 --block-size 128 gives the gpt 5\.28e\+13 parameters: .* about 768 TiB on this machine \(sharded over 1 node\(s\)\), more than its /,
  },
  {
    args: ["--nproc-per-node", "0x2"],
    message:
      /^train: --nproc-per-node: expected a number, got "0x2" \(numbers are read in decimal only\)$/,
  },
  { args: ["--epochs", "0o7"], message: /^train: --epochs: expected a number, got "0o7"/ },
  { args: ["--lr", "0b1"], message: /^train: --lr: expected a number, got "0b1"/ },
  { args: ["--nnodes", "0:2"], message: /^train: --nnodes: MIN must be at least 1 in --nnodes/ },
];

Deno.test("train exits 2 naming the size and the memory, or the number not in decimal, creating nothing", async (t) => {
  for (const { args, message } of CASES) {
    await t.step(args.join(" "), async () => {
      await withTempDir("dtrain_limits_", async (dir) => {
        const run = await train(args, { cwd: dir, timeoutMs: 20_000 });
        assert.equal(run.code, 2, `exit ${run.code}: ${run.stderr}`);
        assert.deepEqual(run.leftovers, []);
        assert.match(run.stderr.replace(/\n\(see --help\)\n$/, ""), message);
        assert.equal(run.stdout, "");
        assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), [], "no run folder");
        assert.deepEqual(run.tempEntries, [], "no launcher log folder is created");
      });
    });
  }
});

Deno.test("parameterCount() is the number of parameters of the models the job builds", () => {
  const configs: Partial<TrainConfig>[] = [
    {},
    { model: "linear" },
    { hidden: [7, 5, 3], dataset: "synthetic" },
    { model: "gpt", dataset: "text", nLayer: 2, nEmbd: 32, nHead: 4, blockSize: 16 },
  ];
  for (const overrides of configs) {
    const config = { ...DEFAULTS, ...overrides };
    const model = buildModel(config, DATASET_SHAPES[config.dataset]);
    const built = model.parameters().reduce((n, p) => n + p.numel(), 0);
    assert.equal(parameterCount(config), built, JSON.stringify(overrides));
  }
});

Deno.test("exceedsMemory() counts every process of the node under DDP and a node's shard under FSDP", () => {
  // 7.95e5 parameters × 4 bytes × (value, gradient, momentum): about 9.5 MB per process.
  const config = parseTrainArgs(["--hidden", "1000", "--nproc-per-node", "4"]) as TrainConfig;
  const perProcess = parameterCount(config) * 4 * 3;
  assert.equal(exceedsMemory(config, 4 * perProcess), null);
  assert.match(exceedsMemory(config, 4 * perProcess - 1)!, /\(4 process\(es\) holding the whole/);
  const fsdp = { ...config, strategy: "fsdp" as const, nnodes: 2 };
  assert.equal(exceedsMemory(fsdp, perProcess / 2), null);
  assert.match(exceedsMemory(fsdp, perProcess / 2 - 1)!, /sharded over 2 node\(s\)/);
  const adamw = { ...config, optimizer: "adamw" as const, nprocPerNode: 1 };
  assert.match(exceedsMemory(adamw, perProcess)!, /with their gradients and adamw state/);
  // The defaults fit this machine.
  assert.equal(exceedsMemory(parseTrainArgs([]) as TrainConfig), null);
});
