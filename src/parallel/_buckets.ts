/**
 * Gradient buckets for DDP: parameters in reverse registration order (the order backward
 * produces their gradients), packed into flat f32 buffers of at most `firstBucketMb` for the first
 * bucket and `bucketCapMb` after, the way PyTorch's reducer assigns them; the buffers' memory
 * (shared between ranks in host memory, see [Note: overlapped bucketed all-reduce] in ddp.ts); and
 * the views of it that serve as the parameters' gradients.
 * @module
 */

import { DistError, emptyShared } from "../distributed/mod.ts";
import type { ProcessGroup } from "../distributed/mod.ts";
import { noGrad } from "../tensor/autograd.ts";
import { getDevice } from "../tensor/device/mod.ts";
import type { Device } from "../tensor/storage.ts";
import { Tensor } from "../tensor/tensor.ts";

/** Where one parameter's gradient lives inside a bucket. */
export interface BucketSlot {
  /** The parameter. */
  param: Tensor;
  /** Its dotted name, for error messages. */
  name: string;
  /** Its first element's offset in the bucket buffer. */
  offset: number;
  /** The view of the bucket memory that serves as `param.grad`. */
  view: Tensor;
  /** Makes a fresh view (after the previous one was disposed by `zeroGrad`). */
  makeView(): Tensor;
}

/** A flat buffer reduced by one collective, and the parameters it holds. */
export interface Bucket {
  /** Position in the launch order (the same on every rank). */
  index: number;
  /** The flat gradient buffer. */
  buffer: Tensor;
  /** Its parameters, in the order their gradients are expected. */
  slots: BucketSlot[];
}

/**
 * Assigns `params` (given in registration order) to buckets. Each bucket is closed once its size
 * reaches the cap, so a parameter larger than the cap gets a bucket of its own. `alloc` makes
 * each bucket's zero-filled flat buffer, one after another in bucket order (DDP's allocation is
 * collective: memory every rank maps, see src/distributed/shared_tensor.ts).
 */
export async function assignBuckets(
  params: readonly { name: string; param: Tensor }[],
  firstBucketBytes: number,
  bucketBytes: number,
  alloc: (numel: number, device: Device) => Promise<Tensor> = (numel, device) =>
    Promise.resolve(Tensor.empty([numel], "f32", true, device)),
): Promise<Bucket[]> {
  const groups: { name: string; param: Tensor }[][] = [];
  let pending: { name: string; param: Tensor }[] = [];
  let pendingBytes = 0;
  const close = () => {
    if (pending.length > 0) groups.push(pending);
    pending = [];
    pendingBytes = 0;
  };
  for (let i = params.length - 1; i >= 0; i--) {
    pending.push(params[i]);
    pendingBytes += params[i].param.numel() * 4;
    if (pendingBytes >= (groups.length === 0 ? firstBucketBytes : bucketBytes)) close();
  }
  close();
  const buckets: Bucket[] = [];
  for (const members of groups) {
    const total = members.reduce((n, p) => n + p.param.numel(), 0);
    // On the parameters' device, so that a GPU model reduces GPU memory (NCCL under "auto").
    const buffer = await alloc(total, members[0].param.device);
    buffer.persistent = true;
    let offset = 0;
    const slots = members.map(({ name, param }) => {
      const at = offset;
      const makeView = () => {
        const view = new Tensor(buffer.storage, param.shape, "f32", undefined, at);
        view.persistent = true;
        return view;
      };
      offset += param.numel();
      return { param, name, offset: at, view: makeView(), makeView };
    });
    buckets.push({ index: buckets.length, buffer, slots });
  }
  return buckets;
}

/**
 * How DDP allocates a bucket of `numel` f32 on `device`: in host memory, memory every rank of
 * `group` maps (see `sharedBucket`); on a device of its own memory (a GPU), a plain zeroed tensor.
 *
 * @param group The process group whose ranks share host buckets.
 * @returns The allocator `assignBuckets` takes.
 */
export function bucketMemory(
  group: ProcessGroup,
): (numel: number, device: Device) => Promise<Tensor> {
  return (numel, device) =>
    getDevice(device).isHostMemory
      ? sharedBucket(numel, group)
      : Promise.resolve(Tensor.empty([numel], "f32", true, device));
}

/**
 * Makes the bucket view the parameter's gradient, copying a separately allocated gradient in. The
 * view is recreated when `zeroGrad()` disposed it (set-to-none clears `.grad` every step).
 */
export function adoptBucketView(slot: BucketSlot): void {
  const { param } = slot;
  const grad = param.grad;
  if (grad !== null && grad === slot.view && !grad.disposed) return;
  if (slot.view.disposed) slot.view = slot.makeView();
  const view = slot.view;
  noGrad(() => {
    if (grad === null || grad.disposed) {
      view.zero_();
    } else {
      view.copy_(grad);
      grad.dispose();
    }
  });
  param.grad = view;
}

/**
 * A host bucket in memory every rank maps (reduced in place over shared memory), or a private one
 * where `/dev/shm` has no room for it: every rank learns the same failure, so all fall back alike,
 * and training goes on with a staged all-reduce. Failures of a peer still throw.
 */
async function sharedBucket(numel: number, group: ProcessGroup): Promise<Tensor> {
  try {
    return await emptyShared([numel], { group });
  } catch (err) {
    if (!(err instanceof DistError && err.code === "internal")) throw err;
    if (group.rank === 0) {
      console.warn(
        `DistributedDataParallel: a gradient bucket stays in private memory: ${err.message}`,
      );
    }
    return Tensor.empty([numel], "f32", true);
  }
}
