// The mixed-precision policy DDP takes (and FSDP is to take): checked on every machine; put into
// effect (bf16 products on the GPU) where a GPU is.
import assert from "node:assert/strict";
import { cuda, nn, parallel } from "../../mod.ts";
import { gpuTest } from "./_gpu.ts";

Deno.test("a mixed-precision policy is refused with the field and value that are wrong", () => {
  const model = new nn.Linear(2, 2);
  // Untyped, as a policy read from a config file would be.
  const apply = (policy: Record<string, string>) =>
    parallel.applyMixedPrecision(
      "DistributedDataParallel",
      model,
      policy as parallel.MixedPrecisionPolicy,
    );
  assert.throws(() => apply({ paramDtype: "bf16" }), {
    name: "RangeError",
    message: 'DistributedDataParallel: mixedPrecision.paramDtype "bf16" computes on a GPU, but a ' +
      'parameter is on cpu; call model.to("cuda") first',
  });
  assert.throws(() => apply({ reduceDtype: "bf16" }), /reduceDtype must be "f32" .*got "bf16"/);
  assert.throws(
    () => apply({ paramDtype: "f16" }),
    /paramDtype must be "f32" or "bf16", got "f16"/,
  );
  apply({ paramDtype: "f32", reduceDtype: "f32" }); // full precision: nothing to do
  parallel.applyMixedPrecision("DistributedDataParallel", model, undefined);
});

gpuTest('paramDtype "bf16" makes the GPU compute products in bf16', () => {
  const model = new nn.Linear(2, 2).to("cuda");
  try {
    parallel.applyMixedPrecision("DistributedDataParallel", model, { paramDtype: "bf16" });
    assert.equal(cuda.getMatmulPrecision(), "medium");
  } finally {
    cuda.setMatmulPrecision("highest");
  }
});
