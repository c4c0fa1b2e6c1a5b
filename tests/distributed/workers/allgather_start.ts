/**
 * Worker for allgather_start_test.ts: all-gathers started on a native thread
 * (`ProcessGroup.allGatherStart`) and waited for with a blocking call. MODE picks the scenario:
 * - "equal": started gathers (inline and past the inline limit, f32 and i32, flat and one output
 *   per rank) beside blocking ones on the same inputs; an all-reduce and a blocking gather issued
 *   while one is started; the thread count around start and wait; and a gather that rank 0 starts
 *   while rank 1 joins late (the times at which each side started and finished);
 * - "absent": rank ABSENT_RANK never calls the gather the others start; it prints "absent" and
 *   waits, so the test can also SIGKILL it (KILLED=1) instead of letting the others time out.
 * @module
 */

import {
  destroyProcessGroup,
  diagnoseError,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import { envInt, runWorker, tensorOf } from "../../_harness/worker.ts";
import { input, PAST_INLINE_LENGTH, SMALL_LENGTH } from "./_data.ts";

const mode = Deno.env.get("MODE");
const timeoutMs = envInt("TEST_TIMEOUT_MS", 20_000);
/** Wall-clock milliseconds, comparable across the processes of one machine. */
const clock = () => performance.timeOrigin + performance.now();

/** Threads of this process, from /proc/self/status. */
function threads(): number {
  return Number(/^Threads:\s+(\d+)/m.exec(Deno.readTextFileSync("/proc/self/status"))![1]);
}

/**
 * The thread count once it is back to `before`, or after 2 s: a started gather's thread may still
 * be exiting when its wait returns, which a leaked thread never finishes doing.
 */
async function threadsSettled(before: number): Promise<number> {
  const deadline = performance.now() + 2000;
  while (threads() > before && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return threads();
}

function zeros(n: number, dtype: "f32" | "i32"): Float32Array | Int32Array {
  return dtype === "f32" ? new Float32Array(n) : new Int32Array(n);
}

await runWorker(async () => {
  const group = await initProcessGroup({ backend: "gloo", timeoutMs });
  const { rank, size } = group;
  if (mode === "equal") {
    const out: Record<string, number[]> = {};
    const threadCounts: number[][] = [];
    // One unrecorded round first: threads the runtime starts on first use (V8's compiler workers
    // for the busy loop below, the transport's) are no thread a started gather leaves behind, and
    // a leak would still add one per measured round.
    const warm = input(rank, SMALL_LENGTH, "f32", 699);
    const warmOut = zeros(size * SMALL_LENGTH, "f32");
    let busy = 0;
    const warming = group.allGatherStart(tensorOf(warmOut), tensorOf(warm));
    for (let i = 0; i < 100_000; i++) busy += i % 7;
    warming.waitBlocking();
    for (const n of [SMALL_LENGTH, PAST_INLINE_LENGTH]) {
      for (const dtype of ["f32", "i32"] as const) {
        const mine = input(rank, n, dtype, 700);
        const blocking = zeros(size * n, dtype);
        group.allGatherBlocking(tensorOf(blocking), tensorOf(mine));
        const flat = zeros(size * n, dtype);
        const list = Array.from({ length: size }, () => zeros(n, dtype));
        const before = threads();
        const started = group.allGatherStart(tensorOf(flat), tensorOf(mine));
        let meanwhile = 0;
        for (let i = 0; i < 100_000; i++) meanwhile += i % 7; // the JavaScript thread goes on
        started.waitBlocking();
        group.allGatherStart(list.map(tensorOf), tensorOf(mine)).waitBlocking();
        threadCounts.push([before, await threadsSettled(before), meanwhile + busy]);
        out[`${dtype}/${n}/blocking`] = Array.from(blocking);
        out[`${dtype}/${n}/flat`] = Array.from(flat);
        out[`${dtype}/${n}/list`] = list.flatMap((x) => Array.from(x));
      }
    }
    // Issued while a gather is started: both run after it, on every rank in the same order.
    const gathered = new Float32Array(size * SMALL_LENGTH);
    const started = group.allGatherStart(
      tensorOf(gathered),
      tensorOf(input(rank, SMALL_LENGTH, "f32", 800)),
    );
    const reduced = input(rank, 1001, "f32", 801);
    await group.allReduce(tensorOf(reduced));
    const after = new Float32Array(size * SMALL_LENGTH);
    group.allGatherBlocking(tensorOf(after), tensorOf(input(rank, SMALL_LENGTH, "f32", 802)));
    started.waitBlocking();
    started.waitBlocking(); // a second wait returns at once
    out.behindStarted = Array.from(gathered);
    out.allReduceBehind = Array.from(reduced);
    out.blockingBehind = Array.from(after);
    // Rank 1 joins late: rank 0's start returns before rank 1 has even called it.
    await group.barrier();
    const late = new Float32Array(size * PAST_INLINE_LENGTH);
    if (rank === 1) await new Promise((r) => setTimeout(r, 300));
    const calledAt = clock();
    const work = group.allGatherStart(
      tensorOf(late),
      tensorOf(input(rank, PAST_INLINE_LENGTH, "f32", 803)),
    );
    const returnedAt = clock();
    work.waitBlocking();
    const waitedAt = clock();
    out.late = Array.from(late);
    const backend = group.backendName; // "none" once destroyed
    await destroyProcessGroup();
    return { results: out, threadCounts, times: { calledAt, returnedAt, waitedAt }, backend };
  }
  if (mode === "absent") {
    if (rank === envInt("ABSENT_RANK", -1)) {
      console.log("absent");
      await new Promise((r) => setTimeout(r, timeoutMs + 5000));
      return {};
    }
    const work = group.allGatherStart(
      tensorOf(new Float32Array(size * 8)),
      tensorOf(new Float32Array(8)),
    );
    const startedAt = performance.now();
    try {
      work.waitBlocking();
    } catch (err) {
      // Over Gloo a survivor may first see its other neighbour's exit: the store says who died.
      console.log(`waited ${Math.round(performance.now() - startedAt)}`);
      throw await diagnoseError(err);
    }
    console.log(`waited ${Math.round(performance.now() - startedAt)}`);
    return {};
  }
  throw new Error(`unknown MODE ${mode}`);
});
