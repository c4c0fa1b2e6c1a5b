// run: deno task launch --nproc-per-node 3 docs/guide/examples/02_groups.ts
// expect: [rank 0] rank 0 of 3 (local rank 0), store at 127.0.0.1, backend shm
// expect: [rank 0] group [0, 2]: my rank 0 of 2, sum 2
// expect: [rank 1] group [0, 2]: not a member (rank -1)
// expect: [rank 2] group [0, 2]: my rank 1 of 2, sum 2
// expect: [rank 2] every rank's name, through the store: host-0 host-1 host-2
// run: DTRAIN_SHM=0 deno task launch --nproc-per-node 3 docs/guide/examples/02_groups.ts
// expect: [rank 1] rank 1 of 3 (local rank 1), store at 127.0.0.1, backend gloo
// expect: [rank 2] group [0, 2]: my rank 1 of 2, sum 2
import assert from "node:assert/strict";
import { dist, tensor } from "../../../mod.ts";

// env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and DTRAIN_TOKEN, all set by the launcher.
const world = await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank();
const env = (name: string) => Deno.env.get(name)!;
console.log(
  `rank ${rank} of ${dist.getWorldSize()} (local rank ${dist.getLocalRank()}), ` +
    `store at ${env("MASTER_ADDR")}, backend ${world.backendName}`,
);

// Every rank calls newGroup with the same ranks, in the same order; only members may use it.
const evens = await dist.newGroup([0, 2]);
if (evens.rank >= 0) {
  const t = tensor([rank]); // 0 and 2
  await dist.allReduce(t, "sum", evens);
  assert.equal(t.item(), 0 + 2); // rank 1's value is not in it
  console.log(`group [0, 2]: my rank ${evens.rank} of ${evens.size}, sum ${t.item()}`);
} else {
  console.log(`group [0, 2]: not a member (rank ${evens.rank})`);
}

// The store (hosted by the launcher) is a key-value server every rank reaches: set a key, then
// read the others' (get waits until a key is set).
const store = await dist.StoreClient.connect({
  hostname: env("MASTER_ADDR"),
  port: Number(env("MASTER_PORT")),
  token: env("DTRAIN_TOKEN"),
  rank,
});
await store.set(`guide/name/${rank}`, `host-${rank}`);
const names = [];
for (let r = 0; r < dist.getWorldSize(); r++) {
  names.push(new TextDecoder().decode(await store.get(`guide/name/${r}`)));
}
console.log(`every rank's name, through the store: ${names.join(" ")}`);
store.close();
await dist.destroyProcessGroup();
