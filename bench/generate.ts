/**
 * Times `GPT.generate` on the train job's end-of-run sample: the nanoGPT Shakespeare-char model
 * (4 layers, 6 heads, width 384, block 256, vocabulary 65), 500 tokens after a one-token prompt,
 * temperature 0.8, top 65, on one thread. Prints one `BENCH_RESULT` line with the seconds and the
 * tokens sampled per second, and a hash of the tokens.
 *
 * Usage: deno run -A --v8-flags=--expose-gc bench/generate.ts [--tokens=500] [--threads=1]
 * @module
 */

import { manualSeed, nn, setNumThreads, tensor } from "../mod.ts";
import { argValue, report } from "./workload.ts";

const tokens = Number(argValue(Deno.args, "tokens", "500"));
setNumThreads(Number(argValue(Deno.args, "threads", "1")));
manualSeed(0);
const model = new nn.GPT({ vocabSize: 65, blockSize: 256, nLayer: 4, nHead: 6, nEmbd: 384 }).eval();
const prompt = tensor([0], [1, 1], { dtype: "i32" });
manualSeed(1337);
const start = performance.now();
const out = model.generate(prompt, tokens, { temperature: 0.8, topK: 65 });
const seconds = (performance.now() - start) / 1000;
// A hash of the tokens: runs before and after a change must sample the same sequence.
const ids = Array.from(out.toArray());
report({
  bench: "generate",
  tokens,
  seconds: +seconds.toFixed(3),
  tokensPerSecond: +(tokens / seconds).toFixed(1),
  tokensHash: ids.reduce((h, id) => (Math.imul(h, 31) + id) >>> 0, 17),
});
