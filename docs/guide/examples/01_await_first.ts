// run: deno task launch --nproc-per-node 2 docs/guide/examples/01_await_first.ts
// expect: [rank 0] allReduce (op #1 of group "world", issued at docs/guide/examples/01_await_first.ts:14) is still in flight on this tensor (f32 [1]): await it, or call .wait(),
// expect: [rank 1] after await: 3
import assert from "node:assert/strict";
import { dist, tensor } from "../../../mod.ts";

await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank();
const t = tensor([rank + 1]);

// PyTorch's all_reduce returns when it is done; dtrain's returns a Work at once, and until it
// settles the collective owns `t`: reading or writing it (or any view of it) throws, where
// PyTorch code ported as is would read this rank's own value without a word.
const work = dist.allReduce(t);
try {
  t.item();
  assert.fail("a tensor in flight was read");
} catch (err) {
  assert.ok(err instanceof dist.DistError && err.code === "invalid");
  console.log(err.message);
}
await work; // or: await work.wait()
assert.equal(t.item(), 3);
console.log(`after await: ${t.item()}`);
await dist.destroyProcessGroup();
