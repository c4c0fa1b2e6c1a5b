// Module.to(device), which `model.to("cuda")` is, on each accelerator: parameters and buffers
// move, tied parameters stay tied, the moved model trains there, a bare family name is its device
// 0 for the model and the DataLoader alike, and a device model's state dict goes through a
// checkpoint file and back onto the device and onto cpu unchanged.
import assert from "node:assert/strict";
import { manualSeed, nn, optim, randn, type Tensor, tensor } from "../../mod.ts";
import { load, save } from "../../src/checkpoint/mod.ts";
import { DataLoader, TensorDataset } from "../../src/data/mod.ts";
import { deviceTest } from "../_harness/devices.ts";

class Tied extends nn.Module {
  encoder = new nn.Linear(3, 4);
  decoder = new nn.Linear(4, 3);
  constructor() {
    super();
    this.decoder.weight = this.encoder.weight; // shape [4, 3] is used transposed below
    this.registerBuffer("scale", tensor([2]));
  }
  forward(x: Tensor): Tensor {
    const h = this.encoder.forward(x).relu();
    return h.matmul(this.decoder.weight).mul(this.buffers()[0]);
  }
}

/** The values of a module's state dict, by name, in host memory. */
const values = (m: nn.Module) =>
  Object.fromEntries(Object.entries(m.stateDict()).map(([k, t]) => [k, [...t.toArray()]]));

deviceTest("Module.to moves parameters and buffers, keeps ties, and trains there", (device) => {
  const model = new Tied();
  const x = tensor([[1, -2, 0.5], [0.3, 0.2, -1]]);
  const before = model.forward(x).toArray();
  const weights = values(model);
  assert.equal(model.to(device), model);
  for (const [name, p] of model.namedParameters()) assert.equal(p.device, device, name);
  assert.equal(model.buffers()[0].device, device);
  assert.equal(model.decoder.weight, model.encoder.weight, "the tie survives the move");
  assert.ok(model.parameters().every((p) => p.requiresGrad));
  assert.deepEqual(values(model), weights);
  const xs = x.to(device);
  assert.deepEqual(model.forward(xs).toArray(), before);
  const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
  const loss = () => model.forward(xs).pow(2).mean();
  const first = loss().item();
  loss().backward();
  opt.step();
  assert.ok(loss().item() < first);
  assert.equal(model.to(device), model, "moving to where it is changes nothing");
});

deviceTest("a bare family name is device 0 for models, tensors and the DataLoader", (device) => {
  const family = device.split(":")[0];
  manualSeed(2);
  const model = new nn.Linear(5, 2).to(family);
  assert.deepEqual(model.parameters().map((p) => p.device), [device, device]);
  assert.equal(tensor([1], [1], { device: family }).device, device);
  const data = new TensorDataset(randn([6, 5]), randn([6, 2]));
  for (const options of [{ device: family }, { device, pinMemory: true }]) {
    const loader = new DataLoader(data, { batchSize: 4, ...options });
    assert.equal(loader.device, device);
    for (const [x, y] of loader) {
      assert.deepEqual([x.device, y.device], [device, device]);
      const loss = model.forward(x).sub(y).pow(2).mean();
      assert.ok(Number.isFinite(loss.item()));
    }
  }
});

deviceTest("a device model's state dict saves and loads back onto the device and cpu", (device) => {
  manualSeed(4);
  const model = new Tied().to(device);
  const dir = Deno.makeTempDirSync();
  try {
    save(`${dir}/model.safetensors`, model.stateDict());
    const { tensors } = load(`${dir}/model.safetensors`);
    assert.deepEqual(Object.keys(tensors).sort(), Object.keys(model.stateDict()).sort());
    manualSeed(5);
    const onDevice = new Tied().to(device), onCpu = new Tied();
    assert.notDeepEqual(values(onDevice), values(model));
    onDevice.loadStateDict(tensors);
    onCpu.loadStateDict(tensors);
    assert.deepEqual(values(onDevice), values(model));
    assert.deepEqual(values(onCpu), values(model));
    assert.ok(onDevice.parameters().every((p) => p.device === device));
    // Moved straight onto the device, the loaded tensors equal the saved ones too.
    const moved = Object.entries(tensors).map(([k, t]) => [k, t.to(device)] as const);
    assert.ok(moved.every(([, t]) => t.device === device));
    assert.deepEqual(
      Object.fromEntries(moved.map(([k, t]) => [k, [...t.toArray()]])),
      values(model),
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
