// The DataLoader's pinMemory: its options are checked on every machine, and where there is no GPU
// it refuses a cuda device with the reason. On each accelerator (emu everywhere, cuda where a GPU
// is), batches copied asynchronously equal the CPU loader's batches bit for bit and arrive before
// the kernels that read them; on a GPU they go through the pinned ring, whose two buffers are
// reused across epochs. The cuda tests are ignored, with the reason in their name, elsewhere.
import assert from "node:assert/strict";
import { cuda, manualSeed, randn, type Tensor, tensor } from "../../mod.ts";
import { DataLoader, type Dataset, TensorDataset } from "../../src/data/mod.ts";
import { pinnedBytes } from "../../src/tensor/device/cuda_pinned.ts";
import { deviceTest, gpuTest } from "../_harness/devices.ts";

/** Features f32 [n, width] and labels i32 [n], as a TensorDataset (the native getBatch path). */
function gathered(n: number, width: number): TensorDataset {
  manualSeed(7);
  return new TensorDataset(
    randn([n, width]),
    tensor(Int32Array.from({ length: n }, (_, i) => (i * 7919) % 1000), [n], { dtype: "i32" }),
  );
}

/** Sample i is [x = [i, i / 2, -i] f32, y = i i32], made per call (the stacking path). */
function perSample(n: number): Dataset<[Tensor, Tensor]> {
  return {
    length: n,
    get: (i) => [tensor([i, i / 2, -i]), tensor([i], [], { dtype: "i32" })],
  };
}

Deno.test("DataLoader: pinMemory must be a boolean, and it needs a GPU device", () => {
  const data = perSample(4);
  assert.throws(
    () => new DataLoader(data, { pinMemory: "yes" as unknown as boolean }),
    { name: "TypeError", message: "DataLoader: pinMemory must be true or false, got yes" },
  );
  assert.throws(() => new DataLoader(data, { pinMemory: true, device: "cpu" }), {
    name: "RangeError",
    message: 'DataLoader: pinMemory copies batches to a GPU, but device is "cpu" ' +
      "(leave pinMemory off for batches in host memory)",
  });
  // Without it nothing changes: batches stay in host memory.
  for (const options of [{}, { pinMemory: false }, { device: "cpu" }]) {
    const loader = new DataLoader(data, { batchSize: 3, ...options });
    assert.equal(loader.pinMemory, false);
    assert.equal(loader.device, "cpu");
    const batches = [...loader];
    assert.deepEqual(batches.map(([x]) => x.device), ["cpu", "cpu"]);
    assert.deepEqual([...batches[1][1].toArray()], [3]);
  }
});

/** Every batch of `epochs` shuffled passes, kept until the pass ends, as host arrays. */
function passes(
  loader: DataLoader,
  epochs: number,
  onBatch: (batch: Tensor[]) => void = () => {},
): number[][][][] {
  const result: number[][][][] = [];
  for (let epoch = 0; epoch < epochs; epoch++) {
    loader.setEpoch(epoch);
    // Held alive together: a buffer reused too early would show in an earlier batch.
    const batches = [...loader];
    batches.forEach(onBatch);
    result.push(batches.map((batch) => batch.map((t) => [...t.toArray()])));
    batches.flat().forEach((t) => t.dispose());
  }
  return result;
}

deviceTest("pinMemory batches equal the CPU loader's, on both collation paths", (first, api) => {
  // The family's last device: batches reach the device asked for, not its first.
  const device = first.replace(/\d+$/, String(api.deviceCount() - 1));
  for (const [data, batchSize] of [[gathered(3000, 257), 512], [perSample(50), 8]] as const) {
    const options = { batchSize, shuffle: true, seed: 3 };
    const onCpu = passes(new DataLoader(data, options), 2);
    const pinned = new DataLoader(data, { ...options, pinMemory: true, device });
    assert.equal(pinned.device, device);
    const onGpu = passes(pinned, 2, (batch) => {
      assert.deepEqual(batch.map((t) => t.device), [device, device]);
      assert.deepEqual(batch.map((t) => t.dtype), ["f32", "i32"]);
    });
    assert.deepEqual(onGpu, onCpu);
  }
});

deviceTest("pinMemory: a kernel queued right after a batch arrives reads all of it", (device) => {
  // Small integers: every f32 sum of a batch is exact, in any order of addition.
  const n = 4096, width = 1024;
  const values = Float32Array.from({ length: n * width }, (_, i) => (i * 31 + (i >> 10)) % 7);
  const data = new TensorDataset(tensor(values, [n, width]), tensor(new Float32Array(n), [n]));
  const expected = [...new DataLoader(data, { batchSize: 1024 })].map(([x]) => x.sum().item());
  // The sum runs on the compute stream, which waits for the copy stream's event (on a GPU).
  const loader = new DataLoader(data, { batchSize: 1024, pinMemory: true, device });
  // Each sum is queued as its batch arrives (Array.from maps while iterating): collecting the
  // batches first would give every copy time to land, and a missing wait would pass unseen.
  assert.deepEqual(Array.from(loader, ([x]) => x.sum().item()), expected);
});

gpuTest("pinMemory reuses the ring's two page-locked buffers across epochs", () => {
  // The last device: the tests before this one filled cuda:0's ring with their larger batches, and
  // a ring never shrinks, so only growth from here is this loader's.
  const device = `cuda:${cuda.deviceCount() - 1}`;
  const before = pinnedBytes(device);
  const data = gathered(2048, 300);
  const loader = new DataLoader(data, { batchSize: 256, shuffle: true, pinMemory: true, device });
  passes(loader, 1);
  const held = pinnedBytes(device);
  // A batch is 256 rows of 300 f32 and 256 i32 labels; each buffer holds one and a half batches
  // (csrc/cuda/pinned.cu's growth), so two buffers hold at most three, plus alignment.
  const batchBytes = 256 * 300 * 4 + 256 * 4;
  assert.ok(held > 0 && held - before <= 3 * batchBytes + 4096, `${held - before} pinned bytes`);
  passes(loader, 3);
  assert.equal(pinnedBytes(device), held, "the buffers grew though no batch outgrew them");
});
