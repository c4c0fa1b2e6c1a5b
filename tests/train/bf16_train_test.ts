// The train job's --dtype: the flag and nanoGPT's `dtype` parse (float16 refused, naming why), the
// forward runs under autocast, and real 2-rank runs with --dtype bf16 move half the bytes of f32's
// in every gradient collective and every training all-gather (from their Chrome traces), while
// the validation loss stays close to the f32 run's.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";
import { parseNanoGptConfig } from "../../src/train/nanogpt_config.ts";
import { ddpPolicy, fsdpPolicy, withAutocast } from "../../src/train/precision.ts";
import { getAutocastDtype, isAutocastEnabled } from "../../src/tensor/autocast.ts";
import { assertSucceeded, smallCorpus, train } from "./_train.ts";

Deno.test("--dtype takes f32 and bf16, and refuses anything else naming the flag", () => {
  assert.equal((parseTrainArgs([]) as TrainConfig).dtype, "f32");
  assert.equal((parseTrainArgs(["--dtype", "bf16"]) as TrainConfig).dtype, "bf16");
  assert.throws(() => parseTrainArgs(["--dtype", "f16"]), /^ConfigError: --dtype: .*"f32".*"bf16"/);
});

Deno.test("nanoGPT's dtype = 'bfloat16' reads as bf16; 'float16' is refused for want of a GradScaler", () => {
  assert.equal(parseNanoGptConfig("dtype = 'bfloat16'\n", "c.py").fields.dtype, "bf16");
  assert.equal(parseNanoGptConfig("dtype = 'float32'\n", "c.py").fields.dtype, "f32");
  assert.throws(
    () => parseNanoGptConfig("dtype = 'float16'\n", "c.py"),
    /c\.py:1: dtype "float16" is not supported \(float32 or bfloat16; float16 trains with a GradScaler/,
  );
});

Deno.test("--dtype bf16 runs the forward under autocast on the job's device and sets both policies", () => {
  const bf16 = { dtype: "bf16", device: "emu" } as const;
  const seen = withAutocast(bf16, () => [isAutocastEnabled("emu"), getAutocastDtype("emu")])();
  assert.deepEqual(seen, [true, "bf16"]);
  assert.equal(isAutocastEnabled("emu"), false);
  const f32 = { dtype: "f32", device: "cpu" } as const;
  assert.equal(withAutocast(f32, () => isAutocastEnabled("cpu"))(), false);
  assert.deepEqual([fsdpPolicy(bf16), ddpPolicy(bf16)], [{ paramDtype: "bf16" }, {
    reduceDtype: "bf16",
  }]);
  assert.deepEqual([fsdpPolicy(f32), ddpPolicy(f32)], [undefined, undefined]);
});

interface Comm {
  name: string;
  bytes: number;
}

/** Rank 0's collectives in the order they ran, from a --profile trace. */
async function rankZeroComms(path: string): Promise<Comm[]> {
  const trace = JSON.parse(await Deno.readTextFile(path));
  const events = (Array.isArray(trace) ? trace : trace.traceEvents) as {
    cat?: string;
    pid?: number;
    ts: number;
    name: string;
    args?: { bytes?: number };
  }[];
  return events.filter((e) => e.cat === "comm" && e.pid === 0 && e.name !== "barrier")
    .sort((a, b) => a.ts - b.ts).map((e) => ({ name: e.name, bytes: e.args?.bytes ?? 0 }));
}

/** Runs the small GPT job on 2 ranks; returns rank 0's collectives and the validation loss. */
async function runJob(dir: string, corpus: string, strategy: string, dtype: string) {
  const out = join(dir, `${strategy}-${dtype}`);
  await Deno.mkdir(out);
  const run = await train([
    ...["--model", "gpt", "--n-layer", "2", "--n-head", "2", "--n-embd", "16"],
    ...["--block-size", "32", "--batch-size", "8", "--threads", "1", "--max-steps", "6"],
    ...["--data-root", corpus],
    ...["--strategy", strategy, "--dtype", dtype, "--master-port", String(freePort())],
    ...["--snapshot", join(out, strategy === "fsdp" ? "snapshot" : "snapshot.safetensors")],
    ...["--profile", join(out, "trace.json")],
  ], { timeoutMs: 120_000 });
  assertSucceeded(run);
  const loss = Number(/validation loss (\d+\.\d+)/.exec(run.stdout)?.[1]);
  assert.ok(Number.isFinite(loss), run.stdout);
  return { comms: await rankZeroComms(join(out, "trace.json")), loss };
}

for (const strategy of ["fsdp", "ddp"]) {
  Deno.test(`train --strategy ${strategy} --dtype bf16 on 2 ranks moves half of f32's bytes and ends near its loss`, async () => {
    await withTempDir(`dtrain_bf16_${strategy}_`, async (dir) => {
      const corpus = await smallCorpus(dir);
      const f32 = await runJob(dir, corpus, strategy, "f32");
      const bf16 = await runJob(dir, corpus, strategy, "bf16");
      assert.deepEqual(bf16.comms.map((c) => c.name), f32.comms.map((c) => c.name));
      // Every collective of the gradients (DDP's buckets, FSDP's reduce-scatters) and every
      // parameter all-gather of FSDP's forwards and backwards moves half the bytes. The same bytes
      // move for the job's scalars and checks across ranks (a few bytes each), DDP's broadcasts
      // at start, and the saved model's gathers of the f32 shards (after the last step).
      const lastStep = f32.comms.findLastIndex((c) => c.name === "reduceScatter");
      let halved = 0, saved = 0;
      f32.comms.forEach((c, i) => {
        const b = bf16.comms[i].bytes,
          what = `${c.name} #${i}: ${b} bytes under bf16, ${c.bytes} under f32`;
        if (c.name.startsWith("allReduce bucket") || c.name === "reduceScatter") {
          assert.equal(2 * b, c.bytes, what);
          halved++;
        } else if (c.name === "allGather" && c.bytes > 64 && 2 * b === c.bytes) halved++;
        else if (c.name === "allGather" && c.bytes > 64 && i > lastStep && b === c.bytes) saved++;
        else assert.equal(b, c.bytes, what);
      });
      if (strategy === "fsdp") {
        assert.ok(saved > 0 && saved <= 4, `${saved} f32 gathers at the end`);
      }
      assert.ok(halved >= 6, `only ${halved} collectives halved`);
      const gap = Math.abs(bf16.loss - f32.loss) / f32.loss;
      assert.ok(gap < 0.02, `validation loss ${bf16.loss} under bf16, ${f32.loss} under f32`);
    });
  });
}
