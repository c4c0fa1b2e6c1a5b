// Data on the emulated accelerator: a TensorDataset of emu tensors gathers its batches on emu (its
// kernel reads device memory, which the host may not read in place), after the kernels that made
// them, and with the row indices as they were at the call (a launch copies its host arguments).
import assert from "node:assert/strict";
import { getDevice, tensor } from "../../mod.ts";
import { DataLoader, TensorDataset } from "../../src/data/mod.ts";
import type { EmuDevice } from "../../src/tensor/device/mod.ts";

Deno.test("a TensorDataset of emu tensors gathers on emu what queued kernels wrote", () => {
  const x = tensor([1, 2, 3, 4, 5, 6, 7, 8], [4, 2]).to("emu:1").mul(10);
  const y = tensor([0, 1, 2, 3], [4], { dtype: "i32" }).to("emu:1");
  const data = new TensorDataset(x, y);
  const queue = (getDevice("emu:1") as EmuDevice).queue;
  assert.ok(queue.pending > 0, "the product is still queued");
  const indices = Int32Array.of(3, 0);
  const [xb, yb] = data.getBatch(indices);
  indices.fill(1); // reused before the gather ran: the gather reads the indices of its call
  assert.deepEqual([xb.device, yb.device], ["emu:1", "emu:1"]);
  assert.deepEqual([...xb.toArray()], [70, 80, 10, 20]);
  assert.deepEqual([...yb.toArray()], [3, 0]);
  const loader = new DataLoader(data, { batchSize: 3, device: "emu:1" });
  assert.deepEqual([...loader].map(([b]) => [...b.toArray()]), [[10, 20, 30, 40, 50, 60], [
    70,
    80,
  ]]);
});
