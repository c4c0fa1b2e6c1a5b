/// <reference lib="deno.worker" />
/**
 * The Web Worker that writes one rank's staged boxes of an asynchronous sharded save and commits
 * it through the checkpoint folder (see [Note: asynchronous sharded saves] in
 * _background_write.ts). It answers one `WriteResult` and sets the job's `finished` flag.
 * @module
 */

import { saveBytes, type TensorBytes } from "../safetensors/_writer.ts";
import { writeTextFileAtomic } from "../io/private_files.ts";
import type { WriteJob, WriteResult } from "./_background_write.ts";
import { commitIndex } from "./_sharded_index.ts";
import { libc, PRIO_PROCESS } from "../../ffi/libc.ts";

/** How often the folder is looked at while waiting for the other ranks. */
const POLL_MS = 5;

/** Waits until `ready()` is true; throws when a rank's failure note appears or time runs out. */
async function waitFor(job: WriteJob, what: string, ready: () => boolean): Promise<void> {
  const folder = `${job.dir}/gen-${job.generation}`;
  const deadline = Date.now() + job.timeoutMs;
  while (!ready()) {
    for (let r = 0; r < job.worldSize; r++) {
      let note: string | null = null;
      try {
        note = Deno.readTextFileSync(`${folder}/rank-${r}.failed`);
      } catch {
        // no note: that rank has not failed
      }
      if (note !== null) throw new Error(`rank ${r}'s part of the save failed: ${note}`);
    }
    if (Date.now() > deadline) {
      throw new Error(`gave up after ${job.timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Whether `dir`'s index names `generation` or a later one. */
function committed(dir: string, generation: number): boolean {
  try {
    return JSON.parse(Deno.readTextFileSync(`${dir}/index.json`)).generation >= generation;
  } catch {
    return false; // not there yet, or being replaced
  }
}

async function run(job: WriteJob): Promise<void> {
  const folder = `${job.dir}/gen-${job.generation}`;
  const sources = job.tensors.map(({ name, dtype, shape, address }): TensorBytes => ({
    name,
    dtype,
    shape,
    withBytes: (write) => write(address === null ? null : Deno.UnsafePointer.create(address)),
  }));
  saveBytes(`${folder}/rank-${job.rank}.safetensors`, sources);
  if (job.index !== null) {
    const files = Array.from(
      { length: job.worldSize },
      (_, r) => `${folder}/rank-${r}.safetensors`,
    );
    await waitFor(job, "every rank's file", () => files.every(exists));
    commitIndex(job.dir, job.index);
  } else {
    await waitFor(job, "rank 0's commit", () => committed(job.dir, job.generation));
  }
}

/**
 * Gives this thread the lowest scheduling priority (nice 19): the write is in no hurry, and the
 * training thread it runs beside should keep the cores (the kernel's copy of the bytes into the
 * page cache counts as this thread's). Where libc cannot be opened the thread keeps its priority.
 */
function yieldToTraining(): void {
  const c = libc();
  if (c !== null) c.setpriority(PRIO_PROCESS, c.gettid(), 19);
}

self.onmessage = async (event: MessageEvent<WriteJob>) => {
  const job = event.data;
  let result: WriteResult = { ok: true };
  try {
    // Set only in-process, by the crash tests' setWriterHooks (never from a file or the
    // environment), to reach the worker's file calls.
    // import target: caller:setWriterHooks
    if (job.hooks !== null) await import(job.hooks);
    yieldToTraining();
    await run(job);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    result = { ok: false, message };
    try {
      writeTextFileAtomic(`${job.dir}/gen-${job.generation}/rank-${job.rank}.failed`, message);
    } catch {
      // The folder itself may be what failed; the error still reaches this rank's caller.
    }
  }
  Atomics.store(new Int32Array(job.finished), 0, 1);
  Atomics.notify(new Int32Array(job.finished), 0);
  self.postMessage(result);
};
