/**
 * The emulated accelerator, devices `emu:0` … `emu:N-1` (`DTRAIN_EMU_DEVICES`, default 8): a GPU's
 * contract with the CPU kernels underneath, so that every device-generic path (placement, a device
 * per rank, device collectives, pinned loading, device checkpoints) runs in CPU CI as it would on
 * `cuda`. Like a GPU it has memory of its own, taken from libdtrain's native allocator and counted
 * per device, never handed out as host memory (`isHostMemory` is false: reading it is a copy);
 * work is queued per device and runs asynchronously, reporting errors at the next read (see
 * [Note: emulated stream] in emu_queue.ts); and mixing its tensors with host ones fails as mixing
 * `cuda` ones does. `"emu"` is `"emu:0"`. Its matrix products honour `setMatmulPrecision` as a
 * GPU's do (emu_precision.ts).
 * @module
 */

import { loadDtrain, Status } from "../../../ffi/dtrain.ts";
import { NativeError } from "../native.ts";
import { checkDtrain } from "./cpu.ts";
import type { DeviceBackend, DevicePtr } from "./device.ts";
import { EmuQueue } from "./emu_queue.ts";
import { withMatmulPrecision } from "./emu_precision.ts";
import { bindKernels, type KernelFunction, type KernelSymbol } from "./kernels.ts";

/** Devices when `DTRAIN_EMU_DEVICES` is unset (a node of eight GPUs, as the clusters have). */
const DEFAULT_DEVICES = 8;

/**
 * How many emulated devices there are: `DTRAIN_EMU_DEVICES`, or 8.
 *
 * @returns The count.
 * @throws RangeError when the variable is not a whole number from 1 to 1024.
 */
export function emuDeviceCount(): number {
  const raw = Deno.env.get("DTRAIN_EMU_DEVICES");
  if (raw === undefined || raw === "") return DEFAULT_DEVICES;
  const count = Number(raw);
  if (!/^\d+$/.test(raw) || count < 1 || count > 1024) {
    throw new RangeError(`DTRAIN_EMU_DEVICES must be a whole number from 1 to 1024, got "${raw}"`);
  }
  return count;
}

/** Bytes each device may hold (`DTRAIN_EMU_MEMORY_BYTES`; unset: as much as the host gives). */
function capacity(): number {
  const raw = Deno.env.get("DTRAIN_EMU_MEMORY_BYTES");
  if (raw === undefined || raw === "") return Infinity;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    throw new RangeError(`DTRAIN_EMU_MEMORY_BYTES must be a positive whole number, got "${raw}"`);
  }
  return Number(raw);
}

/** A copy of an argument that points into host memory, taken at launch (as a launch copies it). */
function snapshot(arg: unknown): unknown {
  return ArrayBuffer.isView(arg) && !(arg instanceof DataView)
    ? (arg as unknown as { slice(): unknown }).slice()
    : arg;
}

/**
 * Host memory a kernel reads through a pointer argument rather than a buffer (which `snapshot`
 * copies): per kernel, each such argument's position and byte length. A launch copies them too,
 * since the caller may reuse or drop that memory before the queue runs.
 */
const HOST_POINTER_ARGS: Partial<
  Record<KernelSymbol, [at: number, nbytes: (a: unknown[]) => number][]>
> = {
  // (src, srcRows, indices, n, ...): the gathers' i32 row indices, n of them.
  dt_gather_rows: [[2, (a) => Number(a[3]) * 4]],
  dt_gather_u8_f32: [[2, (a) => Number(a[3]) * 4]],
  dt_gather_u8_i32: [[2, (a) => Number(a[3]) * 4]],
};

/** Host bytes at `src`, copied now. */
function hostBytes(src: DevicePtr, nbytes: number): Uint8Array {
  return new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(src!, nbytes)).slice();
}

const devices = new Map<number, EmuDevice>();

/** An emulated device: the seam's backend plus its queue (for `emu.synchronize` and collectives). */
export interface EmuDevice extends DeviceBackend {
  /** The device's queue of work. */
  readonly queue: EmuQueue;
}

/**
 * Makes the device `emu:index` (called by the registry on its first use; one object per device).
 *
 * @param index The device, from 0.
 * @returns The device.
 * @throws RangeError for an index beyond `DTRAIN_EMU_DEVICES`.
 */
export function createEmuDevice(index: number): EmuDevice {
  const known = devices.get(index);
  if (known !== undefined) return known;
  const count = emuDeviceCount();
  if (index >= count) {
    throw new RangeError(
      `device "emu:${index}" does not exist: there are ${count} emulated device${
        count === 1 ? "" : "s"
      } (DTRAIN_EMU_DEVICES sets how many)`,
    );
  }
  const lib = loadDtrain();
  const check = (status: number) => checkDtrain(lib, status);
  const name = `emu:${index}`;
  const queue = new EmuQueue(name);
  const limit = capacity();
  const sizes = new Map<bigint, number>();
  let allocated = 0;
  /** Queues a call returning a status; a failure becomes the libdtrain error the cpu reports. */
  const launch = (call: () => number): void => queue.enqueue(() => check(call()));
  const copyNow = (dst: DevicePtr, src: DevicePtr, nbytes: number) =>
    check(lib.dt_copy(dst, src, nbytes));
  const device: EmuDevice = {
    name,
    isHostMemory: false,
    queue,
    kernels: bindKernels(lib, (kernel, symbol) => {
      // A question about an op, not work: answered now, as on a GPU.
      if (symbol === "dt_unary_reads") return kernel;
      const run = withMatmulPrecision(symbol, kernel);
      const hostPointers = HOST_POINTER_ARGS[symbol] ?? [];
      return ((...args: unknown[]) => {
        const copied = args.map(snapshot) as never[];
        const held: Uint8Array[] = [];
        for (const [at, nbytes] of hostPointers) {
          const n = nbytes(args);
          if (copied[at] === null || n <= 0) continue;
          held.push(hostBytes(copied[at], n));
          copied[at] = Deno.UnsafePointer.of(held[held.length - 1]) as never;
        }
        launch(() => {
          const status = run(...copied);
          held.length = 0; // the copies live until the launch has run
          return status;
        });
        return Status.OK;
      }) as KernelFunction;
    }),
    alloc(nbytes, zero) {
      if (allocated + nbytes > limit) {
        throw new NativeError(
          Status.ENOMEM,
          `${name}: out of memory allocating ${nbytes} bytes (${allocated} of ${limit} in use; ` +
            "DTRAIN_EMU_MEMORY_BYTES sets the capacity)",
        );
      }
      const ptr = lib.dt_alloc(Math.max(nbytes, 1), zero ? 1 : 0);
      if (ptr === null) {
        throw new NativeError(Status.ENOMEM, `${name}: out of memory allocating ${nbytes} bytes`);
      }
      sizes.set(BigInt(Deno.UnsafePointer.value(ptr)), nbytes);
      allocated += nbytes;
      return { ptr };
    },
    free(block) {
      const key = BigInt(Deno.UnsafePointer.value(block.ptr));
      const nbytes = sizes.get(key);
      if (nbytes === undefined) return;
      sizes.delete(key);
      allocated -= nbytes;
      // Stream-ordered, as cudaFreeAsync: work queued before the free still reads the block.
      queue.enqueue(() => lib.dt_free(block.ptr));
    },
    allocatedBytes: () => allocated,
    copyIn(dst, hostSrc, nbytes) {
      const bytes = hostBytes(hostSrc, nbytes);
      launch(() => lib.dt_copy(dst, Deno.UnsafePointer.of(bytes), nbytes));
    },
    copyOut(hostDst, src, nbytes) {
      queue.synchronize();
      copyNow(hostDst, src, nbytes);
    },
    copyInAsync(copies) {
      for (const { dst, src, nbytes } of copies) device.copyIn(dst, src, nbytes);
    },
    copy(dst, src, nbytes) {
      launch(() => lib.dt_copy(dst, src, nbytes));
    },
    check,
  };
  devices.set(index, device);
  return device;
}

/**
 * The emulated device `emu:index` if it was made, else null (synchronising one never used is
 * nothing to do).
 *
 * @param index The device.
 * @returns The device or null.
 */
export function madeEmuDevice(index: number): EmuDevice | null {
  return devices.get(index) ?? null;
}
