// run: deno task launch --nproc-per-node 2 docs/guide/examples/10_pipeline.ts
// expect: [rank 0]         Rank 0 Rank 1
// expect: [rank 0] Step 0: 0F0    1F0
// expect: [rank 0] 1f1b: rank 0 holds at most 2 microbatches' activations (gpipe: 4)
// expect-match: \[rank 1\] gpipe: loss \d\.\d{4}, the whole model's on the whole batch \d\.\d{4}
// expect: [rank 1] 1f1b: every gradient of stage 1 equals the whole model's
// expect: [rank 0] gpipe: every gradient of stage 0 equals the whole model's
import assert from "node:assert/strict";
import { dist, F, manualSeed, nn, parallel, type Tensor, tensor } from "../../../mod.ts";

await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank(), stages = dist.getWorldSize(), microbatches = 4;
const config = { vocabSize: 32, blockSize: 8, nLayer: 4, nHead: 2, nEmbd: 16, dropout: 0 };
const build = () => (manualSeed(0), new nn.GPT(config)); // the same weights on every rank
const loss = (logits: Tensor, y: Tensor) =>
  F.crossEntropy(logits.reshape([-1, config.vocabSize]), y.reshape([-1]));

const tokens = Array.from({ length: 8 * 9 }, (_, i) => (i * 7 + (i >> 2)) % 32);
const x = tensor(tokens.filter((_, i) => i % 9 !== 8), [8, 8], { dtype: "i32" });
const y = tensor(tokens.filter((_, i) => i % 9 !== 0), [8, 8], { dtype: "i32" });

// The reference: the whole model on the whole batch, in this process.
const whole = build();
const wholeLoss = whole.forward(x, y).loss!; // nanoGPT's mean cross-entropy, as `loss`
wholeLoss.backward();
const wholeGrads = new Map(whole.namedParameters().map(([n, p]) => [n, p.grad!]));

/** Each rank's actions: at most `p` forwards ahead of their backwards under 1F1B, `m` under GPipe. */
function inFlight(order: parallel.PipelineOrder, r: number): number {
  let live = 0, most = 0;
  for (const a of order[r]) most = Math.max(most, live += a.type === "F" ? 1 : -1);
  return most;
}
const orders = {
  gpipe: parallel.gpipeOrder(stages, microbatches),
  "1f1b": parallel.oneFOneBOrder(stages, microbatches),
};
if (rank === 0) {
  console.log(parallel.formatPipelineOrder(orders["1f1b"]).trimEnd());
  console.log(
    `1f1b: rank 0 holds at most ${inFlight(orders["1f1b"], 0)} microbatches' activations ` +
      `(gpipe: ${inFlight(orders.gpipe, 0)})`,
  );
}

for (const kind of ["gpipe", "1f1b"] as const) {
  // Stage `rank` of the same model: stage 0 has wte, wpe and blocks 0-1; stage 1 blocks 2-3,
  // ln_f and lm_head (tied to wte: the schedule sums the two stages' gradients of it).
  const stage = parallel.splitGPT(build(), rank, stages);
  const pipe = new parallel.PipelineStage(stage, rank, stages);
  const schedule = kind === "gpipe"
    ? new parallel.ScheduleGPipe(pipe, microbatches, loss)
    : new parallel.Schedule1F1B(pipe, microbatches, loss);
  const losses: Tensor[] = [];
  if (rank === 0) await schedule.step(x);
  else await schedule.step(undefined, { target: y, losses });
  if (rank === stages - 1) {
    // The microbatches' mean loss is the whole batch's (equal-sized microbatches).
    const mean = losses.reduce((s, l) => s + l.item(), 0) / losses.length;
    assert.ok(Math.abs(mean - wholeLoss.item()) < 1e-5);
    console.log(
      `${kind}: loss ${mean.toFixed(4)}, the whole model's on the whole batch ` +
        `${wholeLoss.item().toFixed(4)}`,
    );
  }
  for (const [name, p] of stage.namedParameters()) {
    // The whole model lists its tied weight once, as transformer.wte.weight.
    const want = wholeGrads.get(name === "lm_head.weight" ? "transformer.wte.weight" : name)!;
    const got = p.grad!;
    const err = got.sub(want).abs().max().item() / want.abs().max().item();
    assert.ok(err < 1e-5, `${kind}: ${name} relative error ${err}`);
  }
  console.log(`${kind}: every gradient of stage ${rank} equals the whole model's`);
}
await dist.destroyProcessGroup();
