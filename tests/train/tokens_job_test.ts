// The train job's iteration-based training (`--dataset tokens`), as nanoGPT's train.py, on a tiny
// char-level data set written here: the log lines, the snapshot saved only when the validation
// loss improves, resuming from iter_num, DDP and FSDP on 2 ranks with gradient accumulation (the
// same weights), the sample and the report; and the data and config errors, exit 2.
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { manualSeed } from "../../src/tensor/random.ts";
import { openTokenData } from "../../src/train/_tokens.ts";
import type { MetricRecord } from "../../src/train/metrics.ts";
import { assertSucceeded, modelWeights, readSaved, train } from "./_train.ts";
import { logLines, uint16Bytes, unprefixed, writeCharData } from "./_tokens.ts";

const TINY = [
  ...["--dataset", "tokens", "--n-layer", "1", "--n-head", "2", "--n-embd", "16"],
  ...["--block-size", "16", "--batch-size", "4", "--threads", "1", "--lr", "1e-2"],
  ...["--warmup-iters", "2", "--lr-decay-iters", "20", "--min-lr", "1e-3"],
  ...["--max-iters", "20", "--eval-interval", "10", "--eval-iters", "2"],
];
const port = () => ["--master-port", String(freePort())];
const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** The saves nanoGPT makes: at an evaluation after iteration 0 whose val loss beats the best. */
function expectedSaves(evals: { iter: number; val: number }[], best = 1e9): number[] {
  return evals.flatMap(({ iter, val }) => {
    if (!(val < best)) return [];
    best = val;
    return iter > 0 ? [iter] : [];
  });
}

Deno.test("train --dataset tokens logs as nanoGPT, saves when the val loss improves, and resumes from iter_num", async () => {
  await withTempDir("dtrain_tokens_job_", async (dir) => {
    const data = join(dir, "data");
    const chars = await writeCharData(data);
    const out = join(dir, "out");
    const job = [...TINY, "--data-dir", data, "--out-dir", out, "--nproc-per-node", "1"];
    const run = await train([
      ...job,
      "--gradient-accumulation-steps",
      "2",
      "--always-save-checkpoint",
      "false",
    ]);
    assertSucceeded(run);
    assert.match(run.stdout, /^tokens per iteration will be: 128$/m); // 2 × 4 × 16
    const { evals, iters, saves } = logLines(run.stdout);
    assert.deepEqual(evals.map((e) => e.iter), [0, 10, 20], run.stdout);
    assert.deepEqual(iters, range(0, 20));
    assert.ok(evals[0].val > evals[2].val, `the val loss did not fall: ${run.stdout}`);
    assert.ok(evals[0].val < Math.log(chars.length) + 0.5, `an untrained model is near uniform`);
    assert.deepEqual(saves, expectedSaves(evals));
    assert.ok(saves.length > 0, run.stdout);
    const snapshot = join(out, "snapshot.safetensors");
    const meta = JSON.parse(readSaved(snapshot).metadata.dtrain);
    const last = evals.find((e) => e.iter === saves.at(-1))!;
    assert.equal(meta.step, last.iter);
    assert.equal(meta.bestValLoss.toFixed(4), last.val.toFixed(4));
    const done = /^done: iter 21, 21 iterations here, .* val loss ([\d.]+)/m.exec(run.stdout);
    assert.ok(done, run.stdout);
    // The sample, up to the job's last line (where its time went).
    const sample = /^sample:\n([\s\S]*)\ntime: .*\n?(?![\s\S])/m.exec(run.stdout)?.[1] ?? "";
    // As many tokens as the context holds after the prompt's newline (block size 16), each read
    // through the KV cache: one character each.
    assert.equal([...sample].length, 15, `a 15-token sample: ${JSON.stringify(sample)}`);
    assert.ok([...sample.trimEnd()].every((c) => chars.includes(c)), sample);
    const records: MetricRecord[] = (await Deno.readTextFile(join(out, "metrics.jsonl"))).trim()
      .split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(
      records.filter((r) => r.kind === "eval").map((r) => r.validationLoss!.toFixed(4)),
      evals.map((e) => e.val.toFixed(4)),
    ); // deno-fmt-ignore
    const report = await Deno.readTextFile(join(out, "report.html"));
    assert.match(report, /train \(estimate_loss\)/);
    assert.match(report, /validation \(estimate_loss\)/);
    assert.match(report, /iter 20\/20, loss [\d.]+; at iter 20 train loss [\d.]+, val loss/);

    // nanoGPT's init_from='resume': iter_num and best_val_loss from the snapshot, on to 30.
    const from = meta.step;
    const again = await train([
      ...job,
      "--init-from",
      "resume",
      "--max-iters",
      "30",
      "--always-save-checkpoint",
      "true",
    ]); // deno-fmt-ignore
    assertSucceeded(again);
    assert.match(again.stdout, new RegExp(`^resuming from .* at iter ${from}$`, "m"));
    const resumed = logLines(again.stdout);
    assert.deepEqual(resumed.iters, range(from, 30));
    assert.deepEqual(resumed.evals.map((e) => e.iter), range(from, 30).filter((i) => i % 10 === 0));
    assert.deepEqual(resumed.saves, resumed.evals.map((e) => e.iter)); // always save
    assert.match(again.stdout, new RegExp(`^done: iter 31, ${31 - from} iterations here`, "m"));
    const kept = (await Deno.readTextFile(join(out, "metrics.jsonl"))).trim().split("\n")
      .map((l) => JSON.parse(l) as MetricRecord).filter((r) => r.kind === "eval");
    assert.deepEqual(
      kept.map((r) => r.step),
      [...range(0, from - 1), ...range(from, 30)]
        .filter((i) => i % 10 === 0),
    ); // deno-fmt-ignore
    // scratch starts again from iteration 0, whatever is in the out dir
    const scratch = await train([...job, "--max-iters", "0"]);
    assertSucceeded(scratch);
    assert.doesNotMatch(scratch.stdout, /resuming/);
    assert.deepEqual(logLines(scratch.stdout).iters, [0]);
  });
});

Deno.test("train --dataset tokens on 2 ranks: DDP and FSDP with gradient accumulation end with the same weights", async () => {
  await withTempDir("dtrain_tokens_ranks_", async (dir) => {
    const data = join(dir, "data");
    await writeCharData(data);
    const job = [...TINY, "--data-dir", data, "--nproc-per-node", "2"];
    const runs: Record<string, ReturnType<typeof logLines>> = {};
    const dumps: Record<string, string> = {};
    for (const strategy of ["ddp", "fsdp"]) {
      dumps[strategy] = join(dir, `dump-${strategy}`);
      await Deno.mkdir(dumps[strategy]);
      const run = await train([
        ...job,
        ...port(),
        "--strategy",
        strategy,
        "--out-dir",
        join(dir, strategy),
        "--gradient-accumulation-steps",
        "4",
        "--always-save-checkpoint",
        "true",
      ], { timeoutMs: 120_000, env: { DTRAIN_WEIGHTS_DUMP: dumps[strategy] } }); // deno-fmt-ignore
      assertSucceeded(run);
      assert.match(unprefixed(run.stdout), /^tokens per iteration will be: 256$/m); // 4 × 4 × 16
      runs[strategy] = logLines(run.stdout);
      assert.deepEqual(runs[strategy].iters, range(0, 20));
      assert.deepEqual(runs[strategy].saves, [10, 20], run.stdout);
    }
    assert.ok(await Deno.stat(join(dir, "fsdp", "snapshot", "index.json")));
    assert.ok(await Deno.stat(join(dir, "fsdp", "model.safetensors")));
    // Both strategies draw the same batches (seed + rank) and average the same gradients.
    runs.ddp.evals.forEach((e, i) => {
      assert.ok(Math.abs(e.val - runs.fsdp.evals[i].val) < 2e-3, `val at ${e.iter}`);
    });
    const ddp = [0, 1].map((r) => modelWeights(readSaved(join(dumps.ddp, `rank${r}.safetensors`))));
    const fsdp = modelWeights(readSaved(join(dumps.fsdp, "rank0.safetensors")));
    for (const [name, want] of Object.entries(ddp[0])) {
      assert.deepEqual(ddp[1][name], want, `DDP ranks agree on ${name}`);
      let diff = 0, norm = 0;
      want.forEach((w, i) => {
        diff += (fsdp[name][i] - w) ** 2;
        norm += w ** 2;
      });
      assert.ok(Math.sqrt(diff / Math.max(norm, 1e-30)) < 1e-3, `FSDP's ${name} is DDP's`);
    }
  });
});

Deno.test("train --dataset tokens refuses a missing data dir, a train.bin too short and an unknown config key, exit 2", async () => {
  await withTempDir("dtrain_tokens_errors_", async (dir) => {
    const expectRefusal = async (args: string[], message: RegExp) => {
      const run = await train([...TINY, ...args], { cwd: dir, timeoutMs: 30_000 });
      assert.equal(run.code, 2, `${args.join(" ")}:\n${run.stderr}\n${run.stdout}`);
      assert.match(run.stderr, message);
    };
    await expectRefusal(
      ["--data-dir", join(dir, "nowhere")],
      /^train: --data-dir: .*nowhere does not exist/,
    );
    const short = join(dir, "short");
    await writeCharData(short);
    await Deno.writeFile(join(short, "train.bin"), uint16Bytes(Array(16).fill(1)));
    await expectRefusal(
      ["--data-dir", short],
      /^train: --data-dir: .*train\.bin holds 16 tokens, fewer than blockSize \+ 1 = 17/,
    ); // deno-fmt-ignore
    await Deno.writeTextFile(join(dir, "c.py"), "# nanoGPT style\nbatch_size = 4\nn_layers = 2\n");
    await expectRefusal(
      ["--config", "c.py", "--data-dir", short],
      /^train: config: \/\S+\/c\.py:3: unknown nanoGPT config key "n_layers"/,
    ); // deno-fmt-ignore
    const good = join(dir, "good");
    await writeCharData(good);
    await expectRefusal(
      ["--data-dir", good, "--init-from", "resume"],
      /^train: .*snapshot\.safetensors: --init-from resume: there is no snapshot/,
    ); // deno-fmt-ignore
    const entries = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assert.deepEqual(entries, ["c.py", "good", "short"], "nothing is written before the refusal");
  });
});

Deno.test("a token file's batches are nanoGPT's get_batch: windows and the same windows one on", async () => {
  await withTempDir("dtrain_tokens_batch_", async (dir) => {
    await writeCharData(dir);
    const data = openTokenData(dir, 8);
    manualSeed(3);
    const [x, y] = data.train.getBatch(5, 8);
    assert.deepEqual([x.shape, x.dtype], [[5, 8], "i32"]);
    const xs = x.toArray(), ys = y.toArray(), tokens = data.train.tokens;
    for (let b = 0; b < 5; b++) {
      const row = Array.from(xs.subarray(8 * b, 8 * b + 8));
      const starts = range(0, tokens.length - 9).filter((i) =>
        row.every((t, k) => tokens[i + k] === t) && ys[8 * b + 7] === tokens[i + 8]
      );
      assert.ok(starts.length > 0, `row ${b} is a window of train.bin`);
      assert.deepEqual(Array.from(ys.subarray(8 * b, 8 * b + 7)), row.slice(1));
    }
    manualSeed(3);
    const [x2] = data.train.getBatch(5, 8);
    assert.deepEqual(x2.toArray(), xs, "the offsets come from dtrain's generator");
    for (const t of [x, y, x2]) t.dispose();
  });
});

Deno.test("train --init-from DIR starts from GPT-2 weights (GPT.fromPretrained), cropped to --block-size", async () => {
  await withTempDir("dtrain_tokens_pretrained_", async (dir) => {
    const data = join(dir, "data");
    await writeCharData(data); // ids below the fixture's vocabulary of 101
    const gpt2 = join(ROOT, "tests", "fixtures", "gpt2_hf"); // 2 layers, 16 positions
    const job = [...TINY, "--data-dir", data, "--out-dir", join(dir, "out"), "--block-size", "8"];
    const run = await train([...job, "--init-from", gpt2, "--max-iters", "10"]);
    assertSucceeded(run);
    assert.match(run.stdout, /^Initializing from GPT-2 weights: /m);
    // GPT-2's vocabulary is larger than the data's: what the tokenizer lacks reads as U+FFFD.
    assert.match(run.stdout, /^sample:\n[\s\S]{100,}/m);
    const { evals, iters } = logLines(run.stdout);
    assert.deepEqual(iters, range(0, 10));
    assert.deepEqual(evals.map((e) => e.iter), [0, 10]);
    // The checkpoint's shape, not the flags' (1 layer, 16 wide): 2 layers, 32 wide, 8 positions.
    const saved = readSaved(join(dir, "out", "snapshot.safetensors"));
    assert.deepEqual(saved.shapes["model.transformer.wpe.weight"], [8, 32]);
    assert.ok("model.transformer.h.1.attn.c_attn.bias" in saved.tensors);
    const missing = await train([...job, "--init-from", join(dir, "gpt2-xl")]);
    assert.equal(missing.code, 2);
    assert.match(
      missing.stderr,
      /^train: --init-from: expected scratch, resume or a folder of GPT-2/,
    );
  });
});
