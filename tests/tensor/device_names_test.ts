// Device names are canonical: a family's bare name is its index 0 (`"cuda"` is `"cuda:0"`), so
// tensors, modules and the DataLoader agree on one name whichever alias they were given. Checked
// with a registered family that names its devices as cuda does ("gpu:N"), delegating to cpu memory
// but claiming its own (isHostMemory false), so every layer copies in and out as it would on a GPU.

import assert from "node:assert/strict";
import {
  canonicalDeviceName,
  type DeviceBackend,
  getDevice,
  nn,
  registerDevice,
  tensor,
} from "../../mod.ts";
import { DataLoader, TensorDataset } from "../../src/data/mod.ts";

/** Calls per copy direction on the "gpu" devices. */
const calls = new Map<string, number>();
const count = (name: string) => calls.set(name, (calls.get(name) ?? 0) + 1);
let made = 0;

/** Device `gpu:index`: cpu memory and kernels, its own name, copies counted. */
function gpuDevice(index: number): DeviceBackend {
  made++;
  const cpu = getDevice("cpu");
  return {
    ...cpu,
    name: `gpu:${index}`,
    isHostMemory: false,
    allocatedBytes: () => 0, // its blocks come from cpu's allocator, which counts them
    copyIn: (dst, src, nbytes) => (count("copyIn"), cpu.copy(dst, src, nbytes)),
    copyOut: (dst, src, nbytes) => (count("copyOut"), cpu.copy(dst, src, nbytes)),
    copyInAsync: (copies) => (count("copyInAsync"), cpu.copyInAsync(copies)),
  };
}

registerDevice("gpu", gpuDevice);

Deno.test("a bare family name and its index 0 are one device under one canonical name", () => {
  assert.equal(canonicalDeviceName("gpu"), "gpu:0");
  assert.equal(canonicalDeviceName("gpu:0"), "gpu:0");
  assert.equal(canonicalDeviceName("gpu:1"), "gpu:1");
  assert.equal(canonicalDeviceName("cpu"), "cpu");
  assert.equal(getDevice("gpu"), getDevice("gpu:0"));
  assert.notEqual(getDevice("gpu:0"), getDevice("gpu:1"));
  assert.equal(made, 2, "one device per family and index, whatever name asked for it");
});

Deno.test("tensors made on an alias carry the canonical name, and ops accept both aliases", () => {
  const a = tensor([1, 2, 3], [3], { device: "gpu" });
  const b = tensor([10, 20, 30], [3], { device: "gpu:0" });
  assert.equal(a.device, "gpu:0");
  assert.deepEqual(a.add(b).toArray(), new Float32Array([11, 22, 33]));
  calls.clear();
  const same = b.to("gpu");
  assert.equal(same.device, "gpu:0");
  assert.equal(calls.get("copyIn"), undefined, "to() an alias of its own device copies nothing");
  assert.throws(() => a.add(tensor([1, 2, 3], [3], { device: "gpu:1" })), /different devices/);
});

Deno.test('model.to("gpu") and a pinMemory DataLoader on "gpu" meet on "gpu:0"', () => {
  const model = new nn.Linear(3, 2).to("gpu");
  const weight = model.weight;
  assert.equal(weight.device, "gpu:0");
  model.to("gpu:0");
  assert.equal(model.weight, weight, "moving to an alias of its own device keeps the parameter");
  const x = tensor(Float32Array.from({ length: 12 }, (_, i) => i / 4), [4, 3]);
  const data = new TensorDataset(x, tensor([0, 1, 0, 1], [4], { dtype: "i32" }));
  const loader = new DataLoader(data, { batchSize: 2, pinMemory: true, device: "gpu" });
  assert.equal(loader.device, "gpu:0");
  calls.clear();
  const outputs = [...loader].map(([features, labels]) => {
    assert.deepEqual([features.device, labels.device], ["gpu:0", "gpu:0"]);
    return model.forward(features).toArray();
  });
  assert.equal(calls.get("copyInAsync"), 2, "each batch's fields went in one copyInAsync call");
  const expected = model.forward(x.to("gpu")).toArray();
  assert.deepEqual(outputs.flatMap((o) => [...o]), [...expected]);
});

Deno.test("pinMemory refuses a device whose memory is host memory, by what it is, not its name", () => {
  const data = new TensorDataset(tensor([1, 2]), tensor([1, 2]));
  assert.throws(() => new DataLoader(data, { pinMemory: true, device: "cpu" }), {
    name: "RangeError",
    message: 'DataLoader: pinMemory copies batches to a GPU, but device is "cpu" ' +
      "(leave pinMemory off for batches in host memory)",
  });
});
