/**
 * A user's 2-rank job that imports dtrain whole (mod.ts) and all-reduces each rank's `rank + 1`,
 * for offline_test.ts, which runs it on a host with no network.
 * @module
 */

import { dist, tensor } from "../../../mod.ts";

await dist.initProcessGroup({ backend: "gloo" });
const t = tensor([dist.getRank() + 1]);
await dist.allReduce(t);
console.log(`sum ${t.item()}`);
await dist.destroyProcessGroup();
