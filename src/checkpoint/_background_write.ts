/**
 * The background half of an asynchronous sharded save (`saveSharded(…, { async: true })`): the
 * rank's boxes, staged in host memory of their own, are written by a Web Worker while training
 * goes on, and the save is committed without a collective (see [Note: asynchronous sharded saves]).
 *
 * [Note: asynchronous sharded saves]
 * PyTorch's `dcp.async_save` stages the state dict into CPU memory, returns a Future, and writes
 * in a background thread; so does this. What the calling thread does, with every rank, is what a
 * synchronous save does up to its shard file: read the previous index, make `gen-N/`, write and
 * exchange the piece lists. It then copies each box it writes into a staging tensor (training
 * may change the originals at once) and hands their addresses to a worker, which keeps them alive
 * until the worker is done. The worker writes `gen-N/rank-R.safetensors` atomically (a temporary
 * name, fsync, rename), so the file's name appearing means its bytes are on disk. The commit
 * needs every rank's file, and a collective issued from the background would interleave with
 * training's own; so the ranks meet through the checkpoint folder, which they share anyway: rank
 * 0's worker waits until every rank's file is there, then renames the index into place as a
 * synchronous save does; every other rank's worker waits until the index names generation N.
 * A rank whose write fails leaves `gen-N/rank-R.failed` with its error, which stops the others'
 * waiting. Until the index's rename the previous checkpoint is the one that loads, whatever is
 * killed when; a killed save's `gen-N/` is emptied by the next save, as after a synchronous one.
 * A save waits for the previous one to the same folder, a load (or a look at the index) of the
 * folder blocks until this process's save to it is committed, and a process that exits
 * (`Deno.exit` included) with a save in flight waits for it first, as Python waits for DCP's
 * writer thread.
 * tests/checkpoint/async_crash_test.ts kills real ranks during the background write and commit.
 * @module
 */

import type { DType } from "../tensor/dtype.ts";
import { resolve } from "node:path";
import type { Index } from "./_sharded_index.ts";

/** One staged box, as the worker receives it: its address in host memory (null when empty). */
export interface StagedTensor {
  /** Its name in the rank's file. */
  name: string;
  /** Its element type. */
  dtype: DType;
  /** Its dimensions. */
  shape: number[];
  /** `Deno.UnsafePointer.value` of its first byte, or null for an empty tensor. */
  address: bigint | null;
}

/** What the worker writes and how it commits. */
export interface WriteJob {
  /** The checkpoint folder. */
  dir: string;
  /** The generation being saved (`gen-N/`). */
  generation: number;
  /** This rank and the group's size. */
  rank: number;
  /** How many ranks write files. */
  worldSize: number;
  /** This rank's boxes. */
  tensors: StagedTensor[];
  /** The index to commit, on rank 0 (built from every rank's piece list); null elsewhere. */
  index: Index | null;
  /** How long to wait for the other ranks once this rank's file is written. */
  timeoutMs: number;
  /** A module the worker imports first (fault-injection tests only; see `setWriterHooks`). */
  hooks: string | null;
  /** A one-element Int32Array over shared memory that the worker sets to 1 when it is done. */
  finished: SharedArrayBuffer;
}

/** What the worker answers. */
export type WriteResult = { ok: true } | { ok: false; message: string };

let hooks: string | null = null;

/**
 * Has every later background writer import `url` before it writes: how the crash tests put hooks
 * on the worker's file calls, which the calling thread's globals do not reach.
 * @ignore dtrain-internal (tests only)
 */
export function setWriterHooks(url: string | null): void {
  hooks = url;
}

/**
 * Staging buffers of finished writes by byte length, for the next background save (as
 * torchtitan's `async_with_pinned_mem` keeps its pinned ones): a fresh buffer costs the calling
 * thread its page faults and zero-fill, about as long again as the copy (1.8 s for 1 GiB against
 * 0.25 s measured). A buffer is here only while no write uses it, so saves to several folders at
 * once never share one; the pool holds at most what the saves in flight at once staged.
 */
const stagingPool = new Map<number, Uint8Array[]>();

/** A buffer of `nbytes` for staging: one a finished write gave back, or a new one. */
export function stagingBuffer(nbytes: number): Uint8Array {
  return stagingPool.get(nbytes)?.pop() ?? new Uint8Array(nbytes);
}

/** The completion flags of the writes in flight, with their folders and how long each may take. */
const inFlight = new Map<Int32Array, { dir: string; timeoutMs: number }>();
let exitHookInstalled = false;

/**
 * Blocks until this process's background saves in flight (to `dir`, or all of them) are done:
 * what a load or a look at the index does first, so that it sees the save it follows, and what
 * the process does when it exits. The writers run on threads of their own, and the other ranks'
 * on theirs, so blocking this thread holds up nothing they wait for. A writer that died without a
 * word (its module failed to load) is waited for its timeout at most.
 */
export function waitForBackgroundSaves(dir?: string): void {
  const folder = dir === undefined ? undefined : resolve(dir);
  for (const [flag, write] of inFlight) {
    if (folder === undefined || write.dir === folder) Atomics.wait(flag, 0, 0, write.timeoutMs);
  }
}

/**
 * Starts writing the `staged` bytes (memory no one else changes, kept alive until the write is
 * done) in a new worker, and committing the save as [Note: asynchronous sharded saves] says.
 *
 * @returns A promise that settles when this rank's part is committed (rank 0: the index renamed
 *   into place; others: the index names this generation), rejecting with the worker's error.
 */
export function writeInBackground(
  job: Omit<WriteJob, "tensors" | "hooks" | "finished">,
  staged: { name: string; dtype: DType; shape: number[]; bytes: Uint8Array }[],
): Promise<void> {
  const finished = new SharedArrayBuffer(4);
  const flag = new Int32Array(finished);
  const tensors: StagedTensor[] = staged.map(({ name, dtype, shape, bytes }) => ({
    name,
    dtype,
    shape,
    address: bytes.length === 0
      ? null
      : BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes))),
  }));
  if (!exitHookInstalled) {
    // `unload` cannot await, and Deno.exit fires it.
    globalThis.addEventListener("unload", () => waitForBackgroundSaves());
    exitHookInstalled = true;
  }
  // Its write, then the wait for the other ranks, which the job's timeout bounds.
  inFlight.set(flag, { dir: resolve(job.dir), timeoutMs: 2 * job.timeoutMs });
  const worker = new Worker(new URL("./_writer_worker.ts", import.meta.url), { type: "module" });
  return new Promise<void>((resolve, reject) => {
    const settle = (result: WriteResult) => {
      worker.terminate();
      inFlight.delete(flag);
      // The worker read the staged buffers through their addresses (they stayed reachable until
      // now); the next save may stage into them.
      for (const { bytes } of staged) {
        const free = stagingPool.get(bytes.length) ?? [];
        free.push(bytes);
        stagingPool.set(bytes.length, free);
      }
      if (result.ok) resolve();
      else reject(new Error(result.message));
    };
    worker.onmessage = (event: MessageEvent<WriteResult>) => settle(event.data);
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault();
      Atomics.store(flag, 0, 1);
      settle({ ok: false, message: `the background writer failed: ${event.message}` });
    };
    worker.postMessage({ ...job, tensors, hooks, finished } satisfies WriteJob);
  });
}
