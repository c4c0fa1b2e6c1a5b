/**
 * Worker for elastic_death_test.ts: says that it starts its rendezvous, joins the process group
 * (which waits for every rank of the round), checks that the group works with one all-reduce of
 * the ranks, reports the world size it met, and exits 0.
 * @module
 */

import { allReduce, destroyProcessGroup, initProcessGroup } from "../../../src/distributed/mod.ts";
import { tensor } from "../../../src/tensor/creation.ts";

const round = Deno.env.get("DTRAIN_RESTART_COUNT");
console.log(`round ${round}: joining the process group`);
await initProcessGroup();
const world = Number(Deno.env.get("WORLD_SIZE"));
const sum = tensor([Number(Deno.env.get("RANK"))]);
await allReduce(sum);
const expected = (world * (world - 1)) / 2;
if (sum.item() !== expected) {
  console.error(`all-reduce of the ranks gave ${sum.item()}, expected ${expected}`);
  Deno.exit(1);
}
console.log(`round ${round}: met the process group of world size ${world}`);
await destroyProcessGroup();
