// run: deno task launch --nproc-per-node 2 docs/guide/examples/05_fsdp_memory.ts
// expect: [rank 0] ddp  holds 28,032 of 28,032 parameters: 448,512 bytes of state
// expect: [rank 0] fsdp holds 14,016 of 28,032 parameters: 224,256 bytes of state (50.0% of ddp)
// expect: [rank 0] fsdp step: 5 all-gathers of 213,760 bytes, 3 reduce-scatters of 112,128 bytes
// expect: [rank 1] after one step the two strategies' losses agree
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import {
  allocatedBytes,
  dist,
  manualSeed,
  nn,
  optim,
  parallel,
  Tensor,
  tensor,
} from "../../../mod.ts";

// Sizes from the command line, so that docs/guide/figures/05_memory.ts can run bigger models.
const args = parseArgs({
  args: Deno.args,
  options: {
    "n-layer": { type: "string", default: "2" },
    "n-embd": { type: "string", default: "32" },
    strategy: { type: "string", default: "both" },
    json: { type: "boolean", default: false },
  },
}).values;
const config = {
  vocabSize: 64,
  blockSize: 16,
  nLayer: Number(args["n-layer"]),
  nHead: 4,
  nEmbd: Number(args["n-embd"]),
};

await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank();

const fmt = (n: number) => n.toLocaleString("en-US");

/** Bytes of what training keeps between steps: parameters, their gradients, AdamW's m and v. */
function stateBytes(params: Tensor[], opt: optim.AdamW): number {
  let bytes = 0;
  for (const p of params) {
    bytes += 4 * p.numel() + 4 * (p.grad?.numel() ?? 0);
    for (const v of Object.values(opt.state.get(p) ?? {})) {
      if (v instanceof Tensor) bytes += 4 * v.numel();
    }
  }
  return bytes;
}

/** One AdamW step of a fresh GPT (the same on every rank) under `strategy`. */
async function step(strategy: string) {
  manualSeed(0);
  const gpt = new nn.GPT(config);
  const full = gpt.parameters().reduce((n, p) => n + p.numel(), 0);
  let forward: (x: Tensor, y: Tensor) => Tensor;
  let backward: (loss: Tensor) => Promise<void>;
  let stats = () => "";
  if (strategy === "fsdp") {
    // Each block is one parameter group (one all-gather, one reduce-scatter); the root takes the rest.
    for (const block of gpt.transformer.h.children()) parallel.fullyShard(block);
    const model = parallel.fullyShard(gpt);
    forward = (x, y) => model.forward(x, y).loss!;
    backward = (loss) => model.backward(loss);
    stats = () => {
      const { allGathers, reduceScatters, allGatherBytes, reduceScatterBytes } = model.lastStats;
      return `${allGathers} all-gathers of ${fmt(allGatherBytes)} bytes, ` +
        `${reduceScatters} reduce-scatters of ${fmt(reduceScatterBytes)} bytes`;
    };
  } else {
    const ddp = await parallel.DistributedDataParallel.create(gpt);
    forward = (x, y) => ddp.forward(x, y).loss!;
    backward = (loss) => ddp.backward(loss);
  }
  const params = gpt.parameters(); // under FSDP: this rank's shards
  const local = params.reduce((n, p) => n + p.numel(), 0);
  const opt = new optim.AdamW(params, { lr: 1e-3 });
  // Each rank trains on its own tokens, as data parallelism does.
  const tokens = Array.from({ length: 4 * 17 }, (_, i) => (i * 7 + rank * 13) % 64);
  const x = tensor(tokens.filter((_, i) => i % 17 !== 16), [4, 16], { dtype: "i32" });
  const y = tensor(tokens.filter((_, i) => i % 17 !== 0), [4, 16], { dtype: "i32" });
  const before = allocatedBytes();
  const loss = forward(x, y);
  const afterForward = allocatedBytes() - before; // activations, and FSDP's gathered groups
  await backward(loss);
  opt.step();
  const after = forward(x, y).item(); // the next step's loss: it sees the step just taken
  return {
    strategy,
    full,
    local,
    bytes: stateBytes(params, opt),
    afterForward,
    loss: after,
    stats: stats(),
  };
}

const results = [];
for (const strategy of args.strategy === "both" ? ["ddp", "fsdp"] : [args.strategy]) {
  const r = await step(strategy);
  results.push(r);
  if (args.json) continue;
  const ddp = results.find((x) => x.strategy === "ddp");
  const share = r.strategy === "fsdp" && ddp
    ? ` (${(100 * r.bytes / ddp.bytes).toFixed(1)}% of ddp)`
    : "";
  console.log(
    `${r.strategy.padEnd(4)} holds ${fmt(r.local)} of ${fmt(r.full)} parameters: ` +
      `${fmt(r.bytes)} bytes of state${share}`,
  );
  if (r.stats) console.log(`fsdp step: ${r.stats}`);
}
if (args.json && rank === 0) {
  console.log(JSON.stringify({ worldSize: dist.getWorldSize(), config, results }));
}
if (results.length === 2) {
  // FSDP takes DDP's step (the gradients averaged over both ranks' batches), up to float rounding.
  assert.ok(Math.abs(results[0].loss - results[1].loss) < 1e-5, JSON.stringify(results));
  console.log("after one step the two strategies' losses agree");
}
await dist.destroyProcessGroup();
