/**
 * The device seam as the layers above it import it (see [Note: device seam] in device.ts): the
 * backend interface and kernel table, the families' records (family.ts), the registry (devices by
 * name, canonical names), the `cuda` and `emu` namespaces, and the cpu's thread count. No file
 * outside this folder imports a device's own module (cpu.ts, cuda*.ts, emu*.ts).
 * @module
 */

export type { DeviceBackend, DeviceBlock, DeviceFactory, DevicePtr, HostCopy } from "./device.ts";
export {
  type CamelCase,
  type KernelAbi,
  type KernelFunction,
  type KernelName,
  type KernelOf,
  type Kernels,
  type KernelSymbol,
  type KernelSymbolOf,
  kernelSymbols,
  RUNTIME_SYMBOLS,
  type SeamName,
} from "./kernels.ts";
export {
  A100_BF16_PEAK_FLOPS,
  type CommunicatorName,
  DEFAULT_ACCELERATOR,
  DEFAULT_DEVICE,
  deviceName,
  FAMILIES,
  FAMILY_NAMES,
  type FamilyName,
  familyOf,
  type FamilyRecord,
  isFamilyName,
  OWN_MEMORY_FAMILIES,
  type OwnMemoryFamily,
} from "./family.ts";
export { allocatedBytesOnAll, canonicalDeviceName, getDevice, registerDevice } from "./registry.ts";
export * as cuda from "./cuda_api.ts";
export * as emu from "./emu_api.ts";
export type { EmuDevice } from "./emu.ts";
export { getCpuThreads, setCpuThreads } from "./cpu.ts";
// The NCCL backend opens libdtrain_cuda through the cuda device's runtime, which owns the library.
export { cudaLastError, requireCuda } from "./cuda_runtime.ts";
