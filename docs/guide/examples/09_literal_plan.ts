// run: deno task launch --nproc-per-node 2 docs/guide/examples/09_literal_plan.ts
// expect-match: \[rank 0\] the literal plan holds \d[\d,]* of \d[\d,]* parameters on this rank, as parallelizeGPT's
// expect: [rank 1] its logits equal the unsplit GPT's
import assert from "node:assert/strict";
import { dist, manualSeed, nn, parallel, randint } from "../../../mod.ts";

await dist.initProcessGroup({ backend: "gloo" });
const tpMesh = await dist.initDeviceMesh("cpu", [dist.getWorldSize()], { meshDimNames: ["tp"] });
const config = { vocabSize: 96, blockSize: 64, nLayer: 2, nHead: 4, nEmbd: 64 };
const made = () => (manualSeed(0), new nn.GPT(config));
const [model, unsplit, byHelper] = [made(), made(), made()];

// parallelizeGPT's plan without sequence or loss parallelism, written out.
parallel.parallelizeModule(model, tpMesh, {
  "transformer.wte": new parallel.RowwiseParallel({
    inputLayouts: new parallel.Replicate(),
    outputLayouts: new parallel.Replicate(),
  }),
  "transformer.h.*.attn.c_attn": new parallel.ColwiseParallel({ chunks: 3 }),
  "transformer.h.*.attn.c_proj": new parallel.RowwiseParallel(),
  "transformer.h.*.mlp.c_fc": new parallel.ColwiseParallel(),
  "transformer.h.*.mlp.c_proj": new parallel.RowwiseParallel(),
  "lm_head": new parallel.ColwiseParallel({ outputLayouts: new parallel.Replicate() }),
});
parallel.parallelizeGPT(byHelper, tpMesh);

const count = (m: nn.GPT) => [...m.parameters()].reduce((n, p) => n + p.numel(), 0);
assert.equal(count(model), count(byHelper));
const fmt = (n: number) => n.toLocaleString("en-US");
console.log(
  `the literal plan holds ${fmt(count(model))} of ${fmt(count(unsplit))} parameters on this ` +
    "rank, as parallelizeGPT's",
);

const idx = randint(0, config.vocabSize, [2, 16]);
const logits = (m: nn.GPT) => m.forward(idx).logits;
const diff = logits(model).sub(logits(unsplit)).abs().max().item();
assert.ok(diff < 1e-5, `logits differ by ${diff}`);
console.log("its logits equal the unsplit GPT's");
await dist.destroyProcessGroup();
