/**
 * The device seam: what a device (cpu, cuda) gives the layers above it. Ops, optimizers, data
 * loaders and collectives reach memory, copies and kernels only through a {@linkcode DeviceBackend}
 * and ask it what they need to know (`isHostMemory`), never its name; only the files of this folder
 * call a native library, and the layers above import them through mod.ts here.
 *
 * [Note: device seam]
 * A device is an allocator (tinygrad's `_alloc`/`_free`/`_copyin`/`_copyout`) plus a kernel table
 * (declared once in kernels.ts; each device binds it to its library by C name). Memory is
 * addressed by device pointers: on cpu they are host addresses, on a GPU they are device addresses
 * that JavaScript never dereferences. Kernels take those pointers and plain numbers, in the
 * argument order of libdtrain's C ABI (csrc/core/dtrain.h, ffi/dtrain.ts), and return a status
 * (`Status` in ffi/dtrain.ts) that the caller passes to `check`. The cpu table holds the FFI
 * functions themselves, so a kernel call costs what a direct `lib.dt_*` call cost. Devices are
 * found by name in registry.ts, which also makes names canonical (`"cuda"` is `"cuda:0"`); a new
 * family is a file beside cpu.ts exporting a {@linkcode DeviceFactory}, plus its record in
 * family.ts (or a `registerDevice` call at run time, as tests/tensor/device_test.ts does). No op
 * changes: ops allocate their outputs on their inputs' device and call that device's kernels.
 * @module
 */

import type { Kernels } from "./kernels.ts";

// The kernel ABI's enums, for the layers above the seam (which never import ffi/ themselves).
export {
  BinaryOp,
  CompareOp,
  DTypeCode,
  ReductionCode,
  Status,
  UnaryOp,
} from "../../../ffi/dtrain.ts";

/** An address in a device's memory (a host address on cpu). */
export type DevicePtr = Deno.PointerValue;

/**
 * A block from `DeviceBackend.alloc`. `owner` is set when the JavaScript heap owns the memory (cpu's
 * ArrayBuffers, see [Note: cpu memory is JavaScript memory] in cpu.ts): the block lives exactly as
 * long as `owner` is reachable, so whoever uses `ptr` keeps `owner` reachable. Without an owner
 * the block lives until `free`.
 */
export interface DeviceBlock {
  /** The block's address. */
  readonly ptr: DevicePtr;
  /** The object whose lifetime is the block's, if the garbage collector frees it. */
  readonly owner?: object;
  /** Frees a block the device did not allocate (adopted by a Storage), instead of `free`. */
  readonly release?: () => void;
}

/** One block of a host-to-device copy: `nbytes` from host memory at `src` to device memory at `dst`. */
export interface HostCopy {
  /** The destination, in the device's memory. */
  readonly dst: DevicePtr;
  /** The source, in host memory; free to reuse once `copyInAsync` returns. */
  readonly src: DevicePtr;
  /** Bytes to copy. */
  readonly nbytes: number;
}

/** One device: its allocator, copies and kernels (see [Note: device seam]). */
export interface DeviceBackend {
  /** The full name tensors report (`"cpu"`, `"cuda:0"`). */
  readonly name: string;
  /**
   * Whether this device's pointers are host addresses that JavaScript and host libraries (Gloo,
   * shared memory, files) may read and write directly: true for cpu, false for a GPU.
   */
  readonly isHostMemory: boolean;
  /** The kernel table. */
  readonly kernels: Kernels;
  /**
   * Allocates `nbytes` (zero-filled when `zero`).
   * @throws NativeError with `Status.ENOMEM` when the device is out of memory.
   */
  alloc(nbytes: number, zero: boolean): DeviceBlock;
  /** Frees a block from `alloc` now (an owned block too: it need not wait for a collection). */
  free(block: DeviceBlock): void;
  /**
   * Bytes this device's allocator holds now (blocks it borrows elsewhere are counted there). Owned
   * blocks that were garbage collected may still count until their finalizer runs.
   */
  allocatedBytes(): number;
  /** Copies `nbytes` from host memory into device memory. */
  copyIn(dst: DevicePtr, hostSrc: DevicePtr, nbytes: number): void;
  /** Copies `nbytes` from device memory into host memory. */
  copyOut(hostDst: DevicePtr, src: DevicePtr, nbytes: number): void;
  /**
   * Copies host blocks into device memory without waiting for them (PyTorch's pinned memory and
   * `non_blocking=True`): staged through page-locked host memory on a GPU, so the call returns once
   * the sources may be reused, and work queued on the device afterwards sees the copies complete.
   * A device whose memory is host memory copies at once.
   */
  copyInAsync(copies: readonly HostCopy[]): void;
  /** Copies `nbytes` between two blocks of this device. */
  copy(dst: DevicePtr, src: DevicePtr, nbytes: number): void;
  /** Throws the device's error for a kernel's status unless it is OK. */
  check(status: number): void;
}

/** Makes the device for an index (`cuda:1` asks the "cuda" factory for index 1; cpu gets 0). */
export type DeviceFactory = (index: number) => DeviceBackend;
