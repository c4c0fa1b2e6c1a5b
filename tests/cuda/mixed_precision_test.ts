// The mixed-precision policy DDP takes (and FSDP is to take): checked on every machine; put into
// effect on each accelerator (emu everywhere, cuda where a GPU is): bf16 products on the device
// the parameters are on.
import assert from "node:assert/strict";
import { getDevice, manualSeed, nn, parallel, randn, registerDevice } from "../../mod.ts";
import { deviceTest, relativeError } from "./_gpu.ts";

// A device family with memory of its own (isHostMemory false) but no bf16 products to offer.
registerDevice("plain", (index) => ({
  ...getDevice("cpu"),
  name: `plain:${index}`,
  isHostMemory: false,
  allocatedBytes: () => 0, // its blocks come from cpu's allocator, which counts them
}));

/** `policy`, untyped as one read from a config file would be, applied to `model` for DDP. */
const apply = (model: nn.Module, policy: Record<string, string>) =>
  parallel.applyMixedPrecision(
    "DistributedDataParallel",
    model,
    policy as parallel.MixedPrecisionPolicy,
  );

Deno.test("a mixed-precision policy is refused with the field and value that are wrong", () => {
  const model = new nn.Linear(2, 2);
  assert.throws(() => apply(model, { paramDtype: "bf16" }), {
    name: "RangeError",
    message: 'DistributedDataParallel: mixedPrecision.paramDtype "bf16" computes on a GPU, but a ' +
      'parameter is on cpu; call model.to("cuda") first',
  });
  assert.throws(() => apply(model, { reduceDtype: "bf16" }), /reduceDtype must be "f32" .*"bf16"/);
  assert.throws(
    () => apply(model, { paramDtype: "f16" }),
    /paramDtype must be "f32" or "bf16", got "f16"/,
  );
  apply(model, { paramDtype: "f32", reduceDtype: "f32" }); // full precision: nothing to do
  parallel.applyMixedPrecision("DistributedDataParallel", model, undefined);
  assert.throws(() => apply(new nn.Linear(2, 2).to("plain"), { paramDtype: "bf16" }), {
    name: "RangeError",
    message: 'DistributedDataParallel: mixedPrecision.paramDtype "bf16" computes on a GPU, but a ' +
      "parameter is on plain:0, whose products have no bf16 precision (those of cuda, emu do)",
  });
});

deviceTest(
  'paramDtype "bf16" makes the parameters\' device compute products in bf16',
  (device, api) => {
    manualSeed(6);
    const model = new nn.Linear(256, 32);
    const x = randn([64, 256]);
    const exact = model.forward(x).toArray();
    model.to(device);
    const xs = x.to(device);
    assert.ok(relativeError(model.forward(xs).toArray(), exact) <= 1e-5, "f32 before the policy");
    try {
      apply(model, { paramDtype: "bf16" });
      assert.equal(api.getMatmulPrecision(), "medium");
      // Operands rounded to bf16 (8 significant bits, 2^-9 relative): an error far above f32's.
      const err = relativeError(model.forward(xs).toArray(), exact);
      assert.ok(err > 1e-3 && err <= 2e-2, `bf16 rel err ${err}`);
    } finally {
      api.setMatmulPrecision("highest");
    }
  },
);
