/**
 * The cpu device: memory from JavaScript ArrayBuffers, and libdtrain's kernels (OpenBLAS for
 * matrix products). The kernel table holds the FFI functions themselves, so the hot paths cost one
 * native call, as before the seam existed.
 * @module
 */

import { type DtrainSymbols, loadDtrain, Status } from "../../../ffi/dtrain.ts";
import { NativeArgumentError, NativeError } from "../native.ts";
import type { DeviceBackend, DeviceBlock, Kernels } from "./device.ts";

/**
 * [Note: cpu memory is JavaScript memory]
 * A cpu tensor's bytes are an ArrayBuffer's backing store, handed to the kernels by address
 * (`Deno.UnsafePointer.of`). V8 counts backing stores as external memory and collects when they
 * grow, and it frees the store of an unreachable ArrayBuffer in that collection: no event-loop
 * turn is needed, so a synchronous training loop that never calls `tidy` or `dispose` stays flat
 * (memory from a native allocator would wait for a FinalizationRegistry callback, which only runs
 * between macrotasks). Backing stores never move, so an address holds while its ArrayBuffer is
 * reachable: the Storage keeps it (the block's `owner`), and collectives and loaders that hand the
 * address to another thread keep the Storage. `free` keeps the buffer for reuse (see `pool`), or
 * gives the store back at once with `transfer(0)`, which detaches the buffer. Live bytes are counted here: added on `alloc`,
 * subtracted on `free`, or by a FinalizationRegistry once a dropped buffer was collected (its
 * callback waits for an event-loop turn, so until then `allocatedBytes` counts collected blocks
 * and each waiting registration holds a few dozen bytes of heap). When V8 collects is up to it,
 * helped by storage.ts (see [Note: collecting dropped tensors] there).
 */

/** Block alignment: a cache line, and the widest vector (AVX-512) the kernels load. */
const ALIGN = 64;
let liveBytes = 0;
const collected = new FinalizationRegistry<number>((nbytes) => {
  liveBytes -= nbytes;
});

/**
 * Disposed buffers by byte length, reused by the next allocation of that size: a loop under `tidy`
 * allocates the same sizes every step, and a reused buffer skips the allocator, the fresh pages'
 * faults, and the zero-fill when none is asked for (a training step took 4-9% more CPU time
 * without this). The pool holds up to the most bytes that were ever live at once (at least
 * {@linkcode POOL_MIN}, at most {@linkcode POOL_MAX}): memory the process needed at its peak
 * anyway; a 64 MiB pool made the benchmark GPT zero-fill 40 MiB of fresh buffers every step, this
 * one none. A workload whose sizes keep changing can hold up to twice its peak (pooled buffers of
 * old sizes beside live ones of new sizes), as a size-keyed cache does. Beyond the limit, disposal
 * gives the memory back at once. Buffers the garbage collector frees never come here.
 */
const pool = new Map<number, ArrayBuffer[]>();
const POOL_MIN = 64 * 2 ** 20;
const POOL_MAX = 2 ** 30;
let pooledBytes = 0;
let peakLiveBytes = 0;

/** How many bytes may wait in the pool (see the note above). */
function poolLimit(): number {
  return Math.min(Math.max(peakLiveBytes, POOL_MIN), POOL_MAX);
}

/** A fresh (zero-filled) or reused buffer of `size` bytes. */
function takeBuffer(size: number, zero: boolean): ArrayBuffer {
  const reused = pool.get(size)?.pop();
  if (reused !== undefined) {
    pooledBytes -= size;
    if (zero) new Uint8Array(reused).fill(0);
    return reused;
  }
  try {
    return new ArrayBuffer(size);
  } catch (cause) {
    throw new NativeError(
      Status.ENOMEM,
      `cpu: out of memory allocating ${size - ALIGN} bytes (${(cause as Error).message})`,
    );
  }
}

/** A block of `nbytes` in an ArrayBuffer, its address aligned to {@linkcode ALIGN}. */
function allocBuffer(nbytes: number, zero: boolean): DeviceBlock {
  // ALIGN spare bytes: room to align, and never an empty buffer (whose address is null).
  const buffer = takeBuffer(nbytes + ALIGN, zero);
  const base = Deno.UnsafePointer.of(buffer);
  const skip = (ALIGN - Number(Deno.UnsafePointer.value(base)) % ALIGN) % ALIGN;
  liveBytes += nbytes;
  if (liveBytes > peakLiveBytes) peakLiveBytes = liveBytes;
  collected.register(buffer, nbytes, buffer);
  return { ptr: skip === 0 ? base : Deno.UnsafePointer.offset(base!, skip), owner: buffer };
}

/** Gives a block back now: to the pool, or to the system (its ArrayBuffer detached). */
function freeBuffer(block: DeviceBlock): void {
  const buffer = block.owner as ArrayBuffer;
  if (buffer.detached) return;
  liveBytes -= buffer.byteLength - ALIGN;
  collected.unregister(buffer);
  if (pooledBytes + buffer.byteLength > poolLimit()) {
    buffer.transfer(0);
    return;
  }
  pooledBytes += buffer.byteLength;
  const sameSize = pool.get(buffer.byteLength);
  if (sameSize === undefined) pool.set(buffer.byteLength, [buffer]);
  else sameSize.push(buffer);
}

const messageBuffer = new Uint8Array(512);

/** The calling thread's last libdtrain error message. */
function lastError(lib: DtrainSymbols): string {
  const length = lib.dt_last_error(messageBuffer, messageBuffer.length);
  return new TextDecoder().decode(
    messageBuffer.subarray(0, Math.min(length, messageBuffer.length - 1)),
  );
}

/**
 * Makes the cpu device (called once, by the registry, on the first cpu tensor); this is where
 * `libdtrain.so` is opened.
 */
export function createCpuDevice(): DeviceBackend {
  const lib = loadDtrain();
  const check = (status: number): void => {
    if (status === Status.OK) return;
    if (status === Status.EINVAL) throw new NativeArgumentError(lastError(lib));
    throw new NativeError(status, lastError(lib));
  };
  const copy = (dst: Deno.PointerValue, src: Deno.PointerValue, nbytes: number): void => {
    check(lib.dt_copy(dst, src, nbytes));
  };
  const kernels: Kernels = {
    matmul: lib.dt_matmul,
    matmulBatched: lib.dt_matmul_batched,
    linearForward: lib.dt_linear_forward,
    linearBackward: lib.dt_linear_backward,
    fillF32: lib.dt_fill_f32,
    fillI32: lib.dt_fill_i32,
    copyStrided: lib.dt_copy_strided,
    castI32F32: lib.dt_cast_i32_f32,
    castF32I32: lib.dt_cast_f32_i32,
    binary: lib.dt_binary,
    binaryBackward: lib.dt_binary_backward,
    unary: lib.dt_unary,
    unaryBackward: lib.dt_unary_backward,
    axpy: lib.dt_axpy,
    sumAxis: lib.dt_sum_axis,
    expandAxis: lib.dt_expand_axis,
    argmaxRows: lib.dt_argmax_rows,
    softmax: lib.dt_softmax,
    softmaxBackward: lib.dt_softmax_backward,
    crossEntropy: lib.dt_cross_entropy,
    mse: lib.dt_mse,
    layernorm: lib.dt_layernorm,
    layernormBackward: lib.dt_layernorm_backward,
    embedding: lib.dt_embedding,
    embeddingBackward: lib.dt_embedding_backward,
    dropout: lib.dt_dropout,
    randUniform: lib.dt_rand_uniform,
    randn: lib.dt_randn,
    sgdStep: lib.dt_sgd_step,
    adamwStep: lib.dt_adamw_step,
    gatherU8F32: lib.dt_gather_u8_f32,
    gatherRows: lib.dt_gather_rows,
    gatherU8I32: lib.dt_gather_u8_i32,
    attentionForward: lib.dt_attention_forward,
    attentionBackward: lib.dt_attention_backward,
    copyToStrided: lib.dt_copy_to_strided,
    // ---- ops: order, reductions, losses ----
    clamp: lib.dt_clamp,
    clampBackward: lib.dt_clamp_backward,
    abs: lib.dt_abs,
    absBackward: lib.dt_abs_backward,
    maximum: lib.dt_maximum,
    maximumBackward: lib.dt_maximum_backward,
    maxRows: lib.dt_max_rows,
    indexRowsBackward: lib.dt_index_rows_backward,
    extremeBackward: lib.dt_extreme_backward,
    crossEntropyBackward: lib.dt_cross_entropy_backward,
    // ---- end ops ----
    // compare.c and indexing.c
    compare: lib.dt_compare,
    cast: lib.dt_cast,
    fillU8: lib.dt_fill_u8,
    sumAxisInt: lib.dt_sum_axis_int,
    binaryI32: lib.dt_binary_i32,
    clampRange: lib.dt_clamp_range,
    gather: lib.dt_gather,
    scatterAdd: lib.dt_scatter_add,
    indexSelect: lib.dt_index_select,
    indexAdd: lib.dt_index_add,
    copyBlocks: lib.dt_copy_blocks,
    where: lib.dt_where,
    whereBackward: lib.dt_where_backward,
    tril: lib.dt_tril,
  };
  return {
    name: "cpu",
    isHostMemory: true,
    kernels,
    alloc: allocBuffer,
    free: freeBuffer,
    allocatedBytes: () => liveBytes,
    // Host memory is device memory here: the three copies are one memcpy.
    copyIn: copy,
    copyOut: copy,
    copy,
    check,
  };
}

/**
 * Sets how many threads the cpu kernels use (libdtrain's pool and OpenBLAS).
 *
 * @param n A positive integer (checked by the caller).
 */
export function setCpuThreads(n: number): void {
  loadDtrain().dt_set_num_threads(n);
}

/** How many threads the cpu kernels use. */
export function getCpuThreads(): number {
  return loadDtrain().dt_get_num_threads();
}
