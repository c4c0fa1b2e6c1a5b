// run: deno task launch --nproc-per-node 2 docs/guide/examples/01_hello_allreduce.ts
// expect: [rank 0] rank 0 of 2: sum 3
// expect: [rank 1] rank 1 of 2: sum 3
import assert from "node:assert/strict";
import { dist, tensor } from "../../../mod.ts";

// The launcher sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT: env:// reads them.
await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank();
const t = tensor([rank + 1]); // rank 0 holds 1, rank 1 holds 2
await dist.allReduce(t); // "sum" by default: every rank now holds 1 + 2
assert.equal(t.item(), 3);
console.log(`rank ${rank} of ${dist.getWorldSize()}: sum ${t.item()}`);
await dist.destroyProcessGroup();
