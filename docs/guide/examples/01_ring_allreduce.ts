// run: deno task launch --nproc-per-node 3 docs/guide/examples/01_ring_allreduce.ts
// expect: [rank 0] ring all-reduce over the store == dist.allReduce: true (3 ranks, 12 floats)
// expect: [rank 2] ring all-reduce over the store == dist.allReduce: true (3 ranks, 12 floats)
// expect: [rank 1] the same ring over dist.batchIsendIrecv == dist.allReduce: true
import assert from "node:assert/strict";
import { dist, tensor } from "../../../mod.ts";

/**
 * A ring all-reduce (sum) of `data` in place, with the store as the wire: "send chunk c to rank r"
 * is a store key that rank r waits for, so every message can be looked at in the store.
 */
export async function ringAllReduce(
  store: dist.StoreClient,
  data: Float32Array,
  rank: number,
  n: number,
  tag: string,
): Promise<void> {
  const bounds = (
    c: number,
  ) => [Math.floor(c * data.length / n), Math.floor((c + 1) * data.length / n)];
  const chunk = (c: number) => data.subarray(...bounds(((c % n) + n) % n));
  const send = (key: string, c: number) =>
    store.set(`${tag}/${key}/to${(rank + 1) % n}`, new Uint8Array(chunk(c).slice().buffer));
  const receive = async (key: string) => {
    const bytes = await store.get(`${tag}/${key}/to${rank}`); // waits until it is set
    await store.delete(`${tag}/${key}/to${rank}`);
    return new Float32Array(bytes.buffer);
  };
  // Reduce-scatter: n - 1 steps; at step s rank r passes on chunk r - s and adds chunk r - s - 1.
  for (let s = 0; s < n - 1; s++) {
    await send(`rs${s}`, rank - s);
    const got = await receive(`rs${s}`), mine = chunk(rank - s - 1);
    for (let i = 0; i < mine.length; i++) mine[i] += got[i];
  }
  // Rank r now holds the full sum of chunk r + 1. All-gather: n - 1 steps of passing it on.
  for (let s = 0; s < n - 1; s++) {
    await send(`ag${s}`, rank + 1 - s);
    chunk(rank - s).set(await receive(`ag${s}`));
  }
}

/**
 * The same ring over point-to-point messages: at each step a rank sends one chunk to its right
 * neighbour while it receives one from its left, both posted together (`batchIsendIrecv`) so that
 * neither waits for the other to be ready.
 */
export async function ringAllReduceP2P(data: Float32Array, rank: number, n: number) {
  const bounds = (c: number) => {
    const k = ((c % n) + n) % n;
    return [Math.floor(k * data.length / n), Math.floor((k + 1) * data.length / n)];
  };
  const chunk = (c: number) => data.subarray(...bounds(c));
  const [right, left] = [(rank + 1) % n, (rank + n - 1) % n];
  const exchange = async (give: number, take: number) => {
    const out = tensor(chunk(give).slice()), inbox = tensor(new Float32Array(chunk(take).length));
    const works = dist.batchIsendIrecv([
      dist.P2POp(dist.isend, out, right),
      dist.P2POp(dist.irecv, inbox, left),
    ]);
    await Promise.all(works.map((w) => w.wait()));
    return inbox.toArray() as Float32Array;
  };
  for (let s = 0; s < n - 1; s++) {
    const got = await exchange(rank - s, rank - s - 1), mine = chunk(rank - s - 1);
    for (let i = 0; i < mine.length; i++) mine[i] += got[i];
  }
  for (let s = 0; s < n - 1; s++) chunk(rank - s).set(await exchange(rank + 1 - s, rank - s));
}

if (import.meta.main) {
  await dist.initProcessGroup({ backend: "gloo" }); // env:// from the launcher
  const rank = dist.getRank(), n = dist.getWorldSize();
  // A second connection to the launcher's store, with the job's token, for our own keys.
  const store = await dist.StoreClient.connect({
    hostname: Deno.env.get("MASTER_ADDR")!,
    port: Number(Deno.env.get("MASTER_PORT")),
    token: Deno.env.get("DTRAIN_TOKEN")!,
    rank,
  });
  // Small integers: every order of summing them gives the same floats (see the chapter).
  const data = Float32Array.from({ length: 12 }, (_, i) => (rank + 1) * 100 + i);
  const ours = data.slice();
  await ringAllReduce(store, ours, rank, n, "guide/ring");
  const theirs = tensor(data);
  await dist.allReduce(theirs);
  const expected = theirs.toArray();
  assert.deepEqual(ours, expected);
  const same = ours.every((v, i) => v === expected[i]);
  console.log(`ring all-reduce over the store == dist.allReduce: ${same} (${n} ranks, 12 floats)`);
  const overP2P = data.slice();
  await ringAllReduceP2P(overP2P, rank, n);
  assert.deepEqual(overP2P, expected);
  console.log(`the same ring over dist.batchIsendIrecv == dist.allReduce: true`);
  store.close();
  await dist.destroyProcessGroup();
}
