// The train job's command line and config file: every invalid input exits 2 with one message
// naming the field, before anything (a launcher, a log or run folder, a snapshot) is created.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { assertSucceeded, train } from "./_train.ts";

/** Files a case writes into its (otherwise empty) working folder first. */
type Files = Record<string, string>;

const CASES: { name: string; args: string[]; files?: Files; message: RegExp }[] = [
  { name: "negative epochs", args: ["--epochs=-1"], message: /^train: --epochs: Too small/ },
  {
    name: "negative epochs as a separate argument",
    args: ["--epochs", "-1"],
    message: /^train: --epochs: Too small/,
  },
  {
    name: "negative positional epochs",
    args: ["-1", "1"],
    message: /^train: --epochs: Too small/,
  },
  {
    name: "negative learning rate",
    args: ["--lr", "-0.5"],
    message: /^train: --lr: Too small/,
  },
  {
    name: "unknown model",
    args: ["--model", "resnet"],
    message: /^train: --model: Invalid option: expected one of "mlp"\|"linear"/,
  },
  {
    name: "unreadable config file",
    args: ["--config", "missing.json"],
    message: /^train: config: cannot read \/\S+\/missing\.json: /,
  },
  {
    name: "config file that is not JSON",
    args: ["--config", "bad.json"],
    files: { "bad.json": '{"epochs": 1,' },
    message: /^train: config: \/\S+\/bad\.json is not valid JSON: /,
  },
  {
    name: "config file that is not an object",
    args: ["--config", "list.json"],
    files: { "list.json": "[1, 2]" },
    message: /^train: config: \/\S+\/list\.json must hold a JSON object$/,
  },
  {
    name: "unknown config key",
    args: ["--config", "extra.json"],
    files: { "extra.json": '{"epochs": 1, "learningRate": 0.1}' },
    message: /^train: config: Unrecognized key: "learningRate"$/,
  },
  {
    name: "non-numeric batch size",
    args: ["--batch-size", "lots"],
    message: /^train: --batch-size: expected a number, got "lots"$/,
  },
  {
    name: "batch size given as a string in the config file",
    args: ["--config", "string.json"],
    files: { "string.json": '{"batchSize": "64"}' },
    message:
      /^train: batchSize in \/\S+\/string\.json: Invalid input: expected number, received string \(got "64"\)$/,
  },
  {
    name: "zero batch size",
    args: ["--batch-size", "0"],
    message: /^train: --batch-size: Too small/,
  },
  {
    name: "negative straggler threshold",
    args: ["--straggler-ms", "-1"],
    message: /^train: --straggler-ms: Too small/,
  },
  {
    name: "unknown flag",
    args: ["--learning-rate", "0.1"],
    message: /^train: arguments: Unknown option '--learning-rate'/,
  },
  {
    name: "a third positional argument",
    args: ["3", "1", "64"],
    message: /^train: arguments: unexpected extra arguments: 64$/,
  },
  {
    name: "a flag whose value is forgotten swallows no other flag",
    args: ["--snapshot", "--epochs", "1"],
    message: /^train: --snapshot: needs a value, but is followed by --epochs$/,
  },
  {
    name: "a flag given another flag as its value",
    args: ["--snapshot=--epochs", "1"],
    message: /^train: --snapshot: needs a value, but is followed by --epochs$/,
  },
  {
    name: "a flag at the end without its value",
    args: ["--epochs", "1", "--snapshot"],
    message: /^train: --snapshot: needs a value, but nothing follows it$/,
  },
  {
    name: "a launcher flag without its value",
    args: ["--master-port", "--epochs", "1"],
    message: /^train: --master-port: needs a value, but is followed by --epochs$/,
  },
  {
    name: "unknown strategy",
    args: ["--strategy", "zero3"],
    message: /^train: --strategy: Invalid option: expected one of "ddp"\|"fsdp" \(got "zero3"\)$/,
  },
  {
    name: "node rank outside the nodes",
    args: ["--nnodes", "2", "--node-rank", "2"],
    message: /^train: --node-rank: must be below --nnodes \(2\), got 2$/,
  },
];

Deno.test("train exits 2 with one message naming the field, creating nothing", async (t) => {
  for (const { name, args, files = {}, message } of CASES) {
    await t.step(`${name}: ${args.join(" ")}`, async () => {
      await withTempDir("dtrain_config_", async (dir) => {
        for (const [file, text] of Object.entries(files)) {
          await Deno.writeTextFile(join(dir, file), text);
        }
        // With the default snapshot (runs/default/...) and log folder, relative to `dir`.
        const run = await train(args, { cwd: dir, timeoutMs: 20_000 });
        assert.equal(run.code, 2, `exit ${run.code}: ${run.stderr}`);
        assert.deepEqual(run.leftovers, []);
        // One message (node:util's parseArgs explains some over several lines), then the hint.
        assert.match(run.stderr, /^train: [^]*\n\(see --help\)\n$/);
        assert.equal(run.stderr.match(/^train: /gm)?.length, 1, run.stderr);
        assert.doesNotMatch(run.stderr, /^\s+at /m, "no stack trace");
        assert.match(run.stderr.replace(/\n\(see --help\)\n$/, ""), message);
        assert.equal(run.stdout, "");
        const left = (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort();
        assert.deepEqual(left, Object.keys(files).sort(), "no run folder or snapshot is created");
        assert.deepEqual(run.tempEntries, [], "no launcher log folder is created");
      });
    });
  }
});

Deno.test("train --config applies the file and flags override it", async () => {
  await withTempDir("dtrain_config_", async (dir) => {
    const config = join(dir, "job.json");
    await Deno.writeTextFile(
      config,
      JSON.stringify({
        epochs: 5,
        batchSize: 512,
        dataset: "synthetic",
        model: "linear",
        nprocPerNode: 1,
        snapshot: join(dir, "snap.safetensors"),
      }),
    );
    const run = await train(["--config", config, "--epochs", "1"]);
    assertSucceeded(run);
    assert.match(run.stdout, /^epoch 1\/1 step 4\/4 /m, "2048 samples in batches of 512");
    assert.match(run.stdout, /^done: 1 epochs/m);
  });
});

Deno.test("train --help prints the usage and exits 0", async () => {
  const run = await train(["--help"], { timeoutMs: 20_000 });
  assertSucceeded(run);
  assert.match(run.stdout, /^usage: deno task train \[EPOCHS SAVE_EVERY\] \[options\]/);
});

// CUDA_VISIBLE_DEVICES="" hides every GPU (a real one, or the host build's), so this runs on every
// machine.
Deno.test("train --device cuda exits 2 with the reason before starting any worker (no GPU visible)", async () => {
  // The default is 2 processes: the device must be refused before the launcher starts; the
  // same under FSDP, which shards on a GPU too.
  for (const strategy of ["ddp", "fsdp"]) {
    const run = await train(["--device", "cuda", "--strategy", strategy], {
      timeoutMs: 20_000,
      env: { CUDA_VISIBLE_DEVICES: "" },
    });
    assert.equal(run.code, 2, run.stderr);
    assert.deepEqual(run.leftovers, []);
    assert.match(run.stderr, /^train: --device cuda: CUDA is not available: \S.*\n$/);
    assert.equal(run.stdout, "");
    assert.deepEqual(run.tempEntries, [], "no launcher log folder is created");
  }
});

Deno.test("train passes on the launcher's refusals as one message without a stack trace", async (t) => {
  await t.step("a multi-node job without DTRAIN_TOKEN", async () => {
    const run = await train(["--nnodes", "2", "--node-rank", "0"], { timeoutMs: 20_000 });
    assert.equal(run.code, 1, run.stderr);
    assert.deepEqual(run.leftovers, []);
    assert.match(
      run.stderr,
      /^train: launch: multi-node jobs need the same secret on every node: /,
    );
    assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
  });
  await t.step("a busy --master-port", async () => {
    using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = listener.addr.port;
    const run = await train(["--master-port", String(port)], { timeoutMs: 20_000 });
    assert.equal(run.code, 1, run.stderr);
    assert.deepEqual(run.leftovers, []);
    assert.match(
      run.stderr,
      new RegExp(
        `^train: cannot host the store on 127\\.0\\.0\\.1:${port}: address already in use.*; ` +
          `pick another with --master-port P, or, on one node, leave --master-port out \\(or ` +
          `give --standalone\\) to take a free port\n$`,
      ),
    );
    assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
    assert.equal(run.stdout, "", "no worker started");
  });
});
