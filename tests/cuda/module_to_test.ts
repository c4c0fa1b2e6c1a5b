// Module.to(device), which `model.to("cuda")` is, checked on every machine through a device
// registered at run time that keeps its memory in cpu memory (so no GPU is needed): parameters
// and buffers move, tied parameters stay tied, and the moved model trains on its device.
import assert from "node:assert/strict";
import {
  type DeviceBackend,
  getDevice,
  nn,
  optim,
  registerDevice,
  type Tensor,
  tensor,
} from "../../mod.ts";

/** A second device backed by cpu memory (a stand-in for "cuda" in these tests). */
function shadowDevice(): DeviceBackend {
  return { ...getDevice("cpu"), name: "shadow" };
}
registerDevice("shadow", shadowDevice);

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

Deno.test("Module.to moves parameters and buffers, keeps tied parameters tied, and trains there", () => {
  const model = new Tied();
  const x = tensor([[1, -2, 0.5], [0.3, 0.2, -1]]);
  const before = model.forward(x).toArray();
  const weights = model.parameters().map((p) => Array.from(p.toArray()));
  assert.equal(model.to("shadow"), model);
  for (const [name, p] of model.namedParameters()) assert.equal(p.device, "shadow", name);
  assert.equal(model.buffers()[0].device, "shadow");
  assert.equal(model.decoder.weight, model.encoder.weight, "the tie survives the move");
  assert.ok(model.parameters().every((p) => p.requiresGrad));
  assert.deepEqual(model.parameters().map((p) => Array.from(p.toArray())), weights);
  const xs = x.to("shadow");
  assert.deepEqual(model.forward(xs).toArray(), before);
  const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
  const loss = () => model.forward(xs).pow(2).mean();
  const first = loss().item();
  loss().backward();
  opt.step();
  assert.ok(loss().item() < first);
  assert.equal(model.to("shadow"), model, "moving to where it is changes nothing");
});
