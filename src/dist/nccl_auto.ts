/**
 * The "auto" backend: NCCL for tensors on a GPU, Gloo for tensors in host memory, as PyTorch's
 * `init_process_group()` without a backend pairs them. Both communicators connect at init (NCCL
 * only where CUDA is available); each collective goes to the one that can reach its memory. The
 * process group issues collectives one at a time, so the two never interleave.
 * @module
 */

import { isAvailable, unavailableReason } from "../tensor/device/cuda_api.ts";
import type { Backend, Done, NativeBuffer, ReduceOp } from "./backend.ts";
import { DistError } from "./errors.ts";
import { GlooBackend } from "./gloo.ts";
import { NcclBackend, type NcclInit } from "./nccl.ts";

/** Whether a buffer lives in GPU memory. */
function onGpu(buf: NativeBuffer): boolean {
  return buf.device?.startsWith("cuda") ?? false;
}

/** Gloo and, where CUDA is, NCCL; see the module doc. */
export class AutoBackend implements Backend {
  readonly name = "auto";
  #gloo: GlooBackend;
  #nccl: NcclBackend | null;
  #why: string;

  private constructor(gloo: GlooBackend, nccl: NcclBackend | null, why: string) {
    this.#gloo = gloo;
    this.#nccl = nccl;
    this.#why = why;
  }

  /**
   * Connects Gloo, then NCCL when CUDA is available (under their own store prefixes).
   *
   * @param init The rendezvous, and the GPU of this rank.
   * @returns The connected backend.
   * @throws DistError from either rendezvous.
   */
  static async connect(init: NcclInit): Promise<AutoBackend> {
    const gloo = await GlooBackend.connect({ ...init, prefix: `${init.prefix}gloo/` });
    if (!isAvailable()) return new AutoBackend(gloo, null, unavailableReason());
    try {
      const nccl = await NcclBackend.connect({ ...init, prefix: `${init.prefix}nccl/` });
      return new AutoBackend(gloo, nccl, "");
    } catch (err) {
      gloo.close();
      throw err;
    }
  }

  /** The backend for a collective on `bufs`: NCCL when they are on a GPU. */
  #for(what: string, ...bufs: NativeBuffer[]): Backend {
    const gpu = bufs.filter(onGpu).length;
    if (gpu === 0) return this.#gloo;
    if (gpu !== bufs.length) {
      throw new DistError("invalid", `${what}: tensors on a GPU and in host memory in one call`);
    }
    if (this.#nccl === null) {
      throw new DistError(
        "invalid",
        `${what}: a tensor is on a GPU but CUDA is not available: ${this.#why}`,
      );
    }
    return this.#nccl;
  }

  allReduce(buf: NativeBuffer, op: ReduceOp): Promise<Done> {
    return this.#for("allReduce", buf).allReduce(buf, op);
  }

  broadcast(buf: NativeBuffer, root: number): Promise<Done> {
    return this.#for("broadcast", buf).broadcast(buf, root);
  }

  allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<Done> {
    return this.#for("allGather", input, ...outs).allGather(outs, input);
  }

  allGatherBlocking(outs: NativeBuffer[], input: NativeBuffer): void {
    const backend = this.#for("allGatherBlocking", input, ...outs);
    if (backend.allGatherBlocking === undefined) {
      throw new DistError("invalid", `allGatherBlocking: the ${backend.name} backend has none`);
    }
    backend.allGatherBlocking(outs, input);
  }

  reduceScatter(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): Promise<Done> {
    return this.#for("reduceScatter", out, input).reduceScatter(out, input, op);
  }

  barrier(): Promise<Done> {
    return this.#gloo.barrier();
  }

  close(): void {
    this.#nccl?.close();
    this.#gloo.close();
  }
}
