/**
 * Worker for p2p_test.ts. MODE picks the scenario:
 * - "exchange": a ring of blocking send/recv, one blocking batch, batchIsendIrecv to and from every other rank at
 *   once in every dtype, several tags in a row, a large message; checks every byte itself;
 * - "mismatch": rank 0 sends rank 1 messages that disagree on shape, dtype, bytes or tag, then
 *   one that agrees; reports each side's errors;
 * - "kill": rank 1 prints "ready" and waits to be killed; rank 0 receives from it (BLOCKING=1: a
 *   blocking recv, diagnosed through dist.diagnoseError; LATE_MS after
 *   "ready" when set);
 * - "missing": rank 0 receives from rank 1, which never sends (it sleeps past the timeout); with
 *   SIDE=send rank 0 sends to rank 1, which never receives;
 * - "hosts": four ranks on two fake hosts (shm+gloo): messages within each host, between the two
 *   leaders, and the refused one between non-leaders of different hosts;
 * - "destroy": rank 0 destroys the group while its irecv from rank 1 (which never sends) runs;
 * - "emu": a ring of batchIsendIrecv on dtrain tensors of `emu:<rank>` over the emu backend,
 *   each sent right after the kernel that makes it.
 * @module
 */

import type { DType, TensorLike } from "../../../src/distributed/backend.ts";
import type { DistError } from "../../../src/distributed/errors.ts";
import {
  allReduce,
  batchIsendIrecv,
  batchIsendIrecvBlocking,
  destroyProcessGroup,
  diagnoseError,
  getRank,
  getWorldSize,
  initProcessGroup,
  irecv,
  isend,
  P2POp,
  recv,
  send,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import { full, zeros } from "../../../src/tensor/creation.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";

const mode = Deno.env.get("MODE");
const timeoutMs = envInt("TEST_TIMEOUT_MS", 5000);
const BYTES: Record<DType, number> = { f32: 4, i32: 4, bf16: 2, f16: 2 };

/** A tensor over bytes of its own, of `shape` and `dtype`, filled from `seed`. */
function bytesTensor(
  dtype: DType,
  shape: number[],
  seed: number,
): TensorLike & { data: Uint8Array } {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Uint8Array(n * BYTES[dtype]);
  for (let i = 0; i < data.length; i++) data[i] = (seed * 131 + i * 7) & 0xff;
  return {
    data,
    dtype,
    shape,
    numel: n,
    isContiguous: () => true,
    ptr: Deno.UnsafePointer.of(data),
  };
}

function check(got: Uint8Array, dtype: DType, shape: number[], seed: number, what: string) {
  const want = bytesTensor(dtype, shape, seed).data;
  for (let i = 0; i < want.length; i++) {
    if (got[i] !== want[i]) throw new Error(`${what}: byte ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

async function settle(work: PromiseLike<void> | (() => unknown)): Promise<string> {
  try {
    await (typeof work === "function" ? work() : work);
    return "ok";
  } catch (err) {
    return (err as Error).message;
  }
}

await runWorker(async () => {
  await initProcessGroup({ timeoutMs, backend: mode === "emu" ? "emu" : "gloo" });
  const [rank, size] = [getRank(), getWorldSize()];
  const backend = worldGroup().backendName;
  const next = (rank + 1) % size;
  const prev = (rank + size - 1) % size;
  if (mode === "exchange") {
    // A ring of blocking calls: rank 0 sends first, every other rank receives first.
    const shape = [3, 5];
    const inbox = bytesTensor("f32", shape, -1);
    if (rank === 0) {
      send(bytesTensor("f32", shape, rank), next, { tag: 7 });
      recv(inbox, prev, { tag: 7 });
    } else {
      recv(inbox, prev, { tag: 7 });
      send(bytesTensor("f32", shape, rank), next, { tag: 7 });
    }
    check(inbox.data, "f32", shape, prev, "blocking ring");
    // The same ring with every rank sending first, as one blocking batch.
    const ringBox = bytesTensor("f16", [9], -1);
    batchIsendIrecvBlocking([
      P2POp(isend, bytesTensor("f16", [9], rank + 50), next),
      P2POp(irecv, ringBox, prev),
    ]);
    check(ringBox.data, "f16", [9], prev + 50, "blocking batch");
    // Every rank sends to and receives from every other rank at once, in each dtype.
    for (const dtype of ["f32", "i32", "bf16", "f16"] as const) {
      const ops = [];
      const inboxes = new Map<number, ReturnType<typeof bytesTensor>>();
      for (let peer = 0; peer < size; peer++) {
        if (peer === rank) continue;
        const box = bytesTensor(dtype, [2, 17], -1);
        inboxes.set(peer, box);
        ops.push(P2POp(isend, bytesTensor(dtype, [2, 17], rank * 10 + peer), peer));
        ops.push(P2POp(irecv, box, peer));
      }
      await Promise.all(batchIsendIrecv(ops));
      for (const [peer, box] of inboxes) {
        check(box.data, dtype, [2, 17], peer * 10 + rank, `${dtype} from rank ${peer}`);
      }
    }
    // Several tags in a row on one pair, async, received in the same order.
    const tags = [0, 1, 42, 2 ** 32 - 1];
    const boxes = tags.map(() => bytesTensor("i32", [4], -1));
    const works = tags.flatMap((tag, i) => [
      isend(bytesTensor("i32", [4], 100 + rank * 5 + i), next, { tag }),
      irecv(boxes[i], prev, { tag }),
    ]);
    await Promise.all(works);
    tags.forEach((_, i) => check(boxes[i].data, "i32", [4], 100 + prev * 5 + i, `tag #${i}`));
    // A message larger than any staging buffer, both directions at once.
    const big = [1 << 20];
    const bigBox = bytesTensor("f32", big, -1);
    await Promise.all(batchIsendIrecv([
      P2POp(irecv, bigBox, prev),
      P2POp(isend, bytesTensor("f32", big, rank), next),
    ]));
    check(bigBox.data, "f32", big, prev, "4 MiB");
    // Messages beside a collective of the same group: neither waits for the other.
    const sum = new Float32Array(1024).fill(rank + 1);
    const reduced = allReduce({
      dtype: "f32",
      numel: sum.length,
      isContiguous: () => true,
      ptr: Deno.UnsafePointer.of(sum),
    });
    const beside = bytesTensor("i32", [64], -1);
    await Promise.all([
      reduced,
      ...batchIsendIrecv([
        P2POp(isend, bytesTensor("i32", [64], rank + 7), next),
        P2POp(irecv, beside, prev),
      ]),
    ]);
    check(beside.data, "i32", [64], prev + 7, "beside an all-reduce");
    const total = (size * (size + 1)) / 2;
    if (!sum.every((v) => v === total)) throw new Error(`all-reduce beside p2p: ${sum[0]}`);
    await destroyProcessGroup();
    return { backend };
  }
  if (mode === "mismatch") {
    const cases: [DType, number[], number, DType, number[], number][] = [
      ["f32", [2, 3], 5, "f32", [3, 2], 5], // shape
      ["f32", [4], 5, "i32", [4], 5], // dtype
      ["f32", [4], 5, "f32", [8], 5], // bytes
      ["f32", [4], 5, "f32", [4], 6], // tag
      ["f32", [4], 5, "f32", [32768], 5], // a small payload where a large one is expected
      ["f32", [32768], 5, "f32", [4], 5], // and the reverse (Gloo sends the two differently)
    ];
    const errors = [];
    for (const [sd, ss, st, rd, rs, rt] of cases) {
      errors.push(
        rank === 0
          ? await settle(() => send(bytesTensor(sd, ss, 1), 1, { tag: st }))
          : await settle(irecv(bytesTensor(rd, rs, -1), 0, { tag: rt })),
      );
    }
    // The pair is still usable: a message that agrees goes through.
    const box = bytesTensor("f32", [2, 3], -1);
    if (rank === 0) await isend(bytesTensor("f32", [2, 3], 9), 1, { tag: 5 });
    else recv(box, 0, { tag: 5 });
    if (rank === 1) check(box.data, "f32", [2, 3], 9, "after the mismatches");
    await destroyProcessGroup();
    return { errors, backend };
  }
  if (mode === "kill") {
    if (rank === 1) {
      console.log("ready");
      setInterval(() => {}, 1000); // until killed
      await new Promise(() => {});
    }
    // LATE_MS: posted that long after rank 1 said "ready", once its connection is already gone.
    await new Promise((r) => setTimeout(r, envInt("LATE_MS", 0)));
    const start = performance.now();
    // BLOCKING=1: a blocking recv, whose failure the worker diagnoses (dist.diagnoseError).
    const received = Deno.env.get("BLOCKING") === "1"
      ? Promise.resolve().then(() => recv(bytesTensor("f32", [4], -1), 1, { tag: 3 })).catch(
        async (err) => {
          throw await diagnoseError(err);
        },
      )
      : irecv(bytesTensor("f32", [4], -1), 1, { tag: 3 });
    const failure = await received.then(
      () => ({ message: "ok", code: "ok" }),
      (err) => err as DistError,
    );
    return { error: failure.message, code: failure.code, ms: performance.now() - start };
  }
  if (mode === "missing") {
    if (rank === 1) {
      await new Promise((r) => setTimeout(r, timeoutMs + 500));
      return {};
    }
    const start = performance.now();
    const t = bytesTensor("f32", [4], -1);
    const error = await settle(
      Deno.env.get("SIDE") === "send" ? isend(t, 1, { tag: 2 }) : () => recv(t, 1, { tag: 2 }),
    );
    return { error, ms: performance.now() - start };
  }
  if (mode === "destroy") {
    const start = performance.now();
    const pending = rank === 0 ? settle(irecv(bytesTensor("f32", [4], -1), 1)) : "";
    await destroyProcessGroup();
    return { error: await pending, ms: performance.now() - start };
  }
  if (mode === "hosts") {
    // Hosts [0, 1] and [2, 3]: partners on the same host, then the leaders 0 and 2.
    for (const peer of [rank ^ 1, ...(rank % 2 === 0 ? [rank ^ 2] : [])]) {
      const box = bytesTensor("bf16", [5], -1);
      await Promise.all(batchIsendIrecv([
        P2POp(isend, bytesTensor("bf16", [5], rank), peer),
        P2POp(irecv, box, peer),
      ]));
      check(box.data, "bf16", [5], peer, `from rank ${peer}`);
    }
    const refused = rank % 2 === 1
      ? await settle(() => send(bytesTensor("f32", [1], 0), rank ^ 2))
      : "";
    await destroyProcessGroup();
    return { backend, refused };
  }
  if (mode === "emu") {
    const device = `emu:${rank}`;
    const inbox = zeros([3, 4], { device });
    await Promise.all(batchIsendIrecv([
      P2POp(isend, full([3, 4], rank + 1, { device }), next),
      P2POp(irecv, inbox, prev),
    ]));
    const got = Array.from(inbox.toArray() as Float32Array);
    if (!got.every((v) => v === prev + 1)) throw new Error(`emu ring: got ${got}`);
    await destroyProcessGroup();
    return { backend };
  }
  throw new Error(`unknown MODE ${mode}`);
});
