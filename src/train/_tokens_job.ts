/** The end of an iteration-based run (`--dataset tokens`): its last line and a sample. @module */

import { save } from "../checkpoint/mod.ts";
import type { GPT } from "../nn/gpt.ts";
import { EXIT_STOPPED } from "../launch/stop_request.ts";
import { tensor } from "../tensor/creation.ts";
import { manualSeed } from "../tensor/random.ts";
import { getNumThreads, setNumThreads } from "../tensor/threads.ts";
import type { TrainConfig } from "./_schema.ts";
import { finalWeights, wholeGPT } from "./_final_weights.ts";
import { fromMeta } from "../data/tokenizer.ts";
import { decodeInVocab } from "./_sample_source.ts";
import { checkTokenData, type TokenMeta } from "./_tokens.ts";
import type { IterResult, IterTrainer } from "./iter_trainer.ts";

/**
 * Refuses, before any process starts, a `--dataset tokens` run whose data is missing or too short.
 * @throws ConfigError ("dataDir") naming the file.
 */
export function refuseBadTokenData(config: TrainConfig): void {
  if (config.dataset === "tokens") checkTokenData(config.dataDir, config.blockSize);
}

/**
 * nanoGPT sample.py's sample after a newline, temperature 0.8, top 200, decoded with meta.json's
 * tokenizer (its token ids without one): up to sample.py's 500 tokens, but no more than the
 * context holds, where every step reads one token through the KV cache. Past the context, each
 * token is a forward over the whole window (nanoGPT's crop), as long as 30-40 training
 * iterations for 250 tokens of a small model: the job's last line would be mostly sampling.
 * `deno task sample --max-new-tokens N` samples longer.
 */
export async function sampleTokens(model: GPT, meta: TokenMeta): Promise<string> {
  manualSeed(1337);
  model.eval();
  const codec = meta.tokenizer === null ? null : await fromMeta(meta.tokenizer);
  const start = codec === null ? [0] : tryEncode(codec, "\n");
  const device = model.parameters()[0].device;
  const prompt = tensor(Int32Array.from(start), [1, start.length], { dtype: "i32", device });
  const topK = Math.min(200, meta.vocabSize);
  const length = Math.min(500, model.config.blockSize - start.length);
  const tokens = model.generate(prompt, length, { temperature: 0.8, topK }).toArray();
  const fresh = tokens.subarray(start.length);
  if (codec === null) return `(token ids: no meta.json to decode them) ${fresh.join(" ")}`;
  return decodeInVocab(codec, fresh);
}

/** `text`'s ids, or token 0 when the tokenizer cannot encode it (a table without a newline). */
function tryEncode(codec: { encode(text: string): ArrayLike<number> }, text: string): number[] {
  try {
    const ids = Array.from(codec.encode(text));
    return ids.length > 0 ? ids : [0];
  } catch {
    return [0];
  }
}

/** The last line of an iteration-based run. */
function doneLine(result: IterResult): string {
  const { iterNum, itersHere, lastLoss, losses, bestValLoss } = result;
  const trained = itersHere > 0
    ? `${itersHere} iterations here, last logged loss ${lastLoss.toFixed(4)}`
    : "no iteration trained";
  const evaluated = losses
    ? `, train loss ${losses.train.toFixed(4)}, val loss ${losses.val.toFixed(4)}`
    : "";
  const best = bestValLoss < 1e9 ? ` (best val loss ${bestValLoss.toFixed(4)})` : "";
  return `done: iter ${iterNum}, ${trained}${evaluated}${best}`;
}

/**
 * Ends a rank's iteration-based run: EXIT_STOPPED when the launcher stopped it, else the final
 * weights (gathered under FSDP; DTRAIN_WEIGHTS_DUMP as the epoch-based job), and on rank 0 the
 * last line, a sample and where the job's time went (`time: ...`, the last line). Resolves to
 * the rank's exit code.
 */
export async function finishTokensRun(trainer: IterTrainer, result: IterResult): Promise<number> {
  const code = await trainer.times.measure("end", () => finish(trainer, result));
  if (trainer.rank === 0) console.log(trainer.times.summary());
  return code;
}

async function finish(trainer: IterTrainer, result: IterResult): Promise<number> {
  if (trainer.stoppedOnRequest) {
    if (trainer.rank === 0) {
      console.log(
        `stopped by the launcher at iter ${result.iterNum}; the snapshot resumes the run`,
      );
    }
    return EXIT_STOPPED;
  }
  const weights = await finalWeights(trainer);
  const dump = Deno.env.get("DTRAIN_WEIGHTS_DUMP");
  if (dump) save(`${dump}/rank${trainer.rank}.safetensors`, weights);
  if (trainer.rank === 0) {
    console.log(doneLine(result));
    const meta = trainer.data.meta;
    // The other ranks are done: the sample (500 forwards, a third of a small run's time on one
    // thread) takes every core this node gave them, unless --threads fixed the count.
    if (trainer.config.threads === 0) {
      setNumThreads(Math.max(getNumThreads(), navigator.hardwareConcurrency));
    }
    console.log(`sample:\n${await sampleTokens(wholeGPT(trainer, weights), meta)}`);
  }
  return 0;
}
