// run: deno task launch --nproc-per-node 2 docs/guide/examples/08_emu_fsdp.ts
// expect: [rank 0] on emu:0, process group backend auto
// expect: [rank 1] on emu:1, process group backend auto
// expect: [rank 0] f32  gathers 213,760 bytes, reduce-scatters 112,128 bytes a step
// expect: [rank 0] bf16 gathers 106,880 bytes, reduce-scatters 56,064 bytes a step
// expect: [rank 0] the first step's loss in bf16 is within 1% of f32's
// timeout: 60
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import { dist, manualSeed, nn, optim, parallel, tensor } from "../../../mod.ts";

// Sizes from the command line, for docs/guide/figures/08_precision.ts.
const args = parseArgs({
  args: Deno.args,
  options: {
    "n-layer": { type: "string", default: "2" },
    "n-embd": { type: "string", default: "32" },
    steps: { type: "string", default: "3" },
  },
}).values;
const config = {
  vocabSize: 64,
  blockSize: 16,
  nLayer: Number(args["n-layer"]),
  nHead: 4,
  nEmbd: Number(args["n-embd"]),
};

// The emulated accelerator: a GPU's contract (its own memory, queued work, a NCCL-like backend)
// over the CPU kernels. One device per local rank, as with --device cuda.
const device = `emu:${Deno.env.get("LOCAL_RANK")}`;
await dist.initProcessGroup({ backend: "auto" }); // nccl for cuda tensors, emu for emu ones
const rank = dist.getRank();
console.log(`on ${device}, process group backend ${dist.worldGroup().backendName}`);

/** `steps` AdamW steps of an FSDP GPT whose gathers and reductions run in `paramDtype`. */
async function train(paramDtype: "f32" | "bf16") {
  manualSeed(0);
  const gpt = new nn.GPT(config).to(device);
  const mpPolicy = { paramDtype } as const; // FSDP2's MixedPrecisionPolicy(param_dtype=...)
  for (const block of gpt.transformer.h.children()) parallel.fullyShard(block, { mpPolicy });
  const model = parallel.fullyShard(gpt, { mpPolicy });
  const opt = new optim.AdamW(model.parameters(), { lr: 1e-2 });
  const tokens = Array.from({ length: 4 * 17 }, (_, i) => (i * 7 + rank * 13) % 64);
  const x = tensor(tokens.filter((_, i) => i % 17 !== 16), [4, 16], { dtype: "i32" }).to(device);
  const y = tensor(tokens.filter((_, i) => i % 17 !== 0), [4, 16], { dtype: "i32" }).to(device);
  let first = 0, start = 0;
  for (let step = 0; step < Number(args.steps); step++) {
    if (step === 1) start = performance.now(); // step 0 warms up
    const l = model.forward(x, y).loss!;
    await model.backward(l);
    opt.step();
    opt.zeroGrad();
    if (step === 0) first = l.item(); // a read: it waits for the device's queue
  }
  const { allGatherBytes, reduceScatterBytes } = model.lastStats;
  const stepMs = (performance.now() - start) / (Number(args.steps) - 1);
  return { paramDtype, allGatherBytes, reduceScatterBytes, first, stepMs };
}

const fmt = (n: number) => n.toLocaleString("en-US");
const f32 = await train("f32"), bf16 = await train("bf16");
for (const r of [f32, bf16]) {
  console.log(
    `${r.paramDtype.padEnd(4)} gathers ${fmt(r.allGatherBytes)} bytes, ` +
      `reduce-scatters ${fmt(r.reduceScatterBytes)} bytes a step`,
  );
}
assert.equal(bf16.allGatherBytes * 2, f32.allGatherBytes); // half the bytes on the wire
// The first step's loss differs only by the bf16 rounding of the parameters and activations.
assert.ok(
  Math.abs(bf16.first - f32.first) < 0.01 * f32.first,
  `${bf16.first} against ${f32.first}`,
);
console.log("the first step's loss in bf16 is within 1% of f32's");
if (rank === 0) console.log(JSON.stringify({ config, results: [f32, bf16] }));
await dist.destroyProcessGroup();
