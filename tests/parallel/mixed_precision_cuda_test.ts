// The mixed-precision policy DDP and FSDP take (see [Note: mixed precision] in
// src/parallel/mixed_precision.ts): checked on every machine, and put into effect on each
// accelerator (emu everywhere, cuda where a GPU is): fullyShard with paramDtype bf16 gathers bf16
// parameters on the device, computes on them, and leaves f32 gradients on the f32 shards.
import assert from "node:assert/strict";
import { dist, manualSeed, nn, parallel, randn } from "../../mod.ts";
import { deviceTest } from "../_harness/devices.ts";
import { maxRelativeError } from "../_harness/close.ts";

/** `policy`, untyped as one read from a config file would be, resolved for DDP. */
const resolve = (policy: Record<string, unknown>) =>
  parallel.resolveMixedPrecision(
    "DistributedDataParallel",
    policy as parallel.MixedPrecisionPolicy,
    "mixedPrecision",
    "f32",
  );

Deno.test("a mixed-precision policy is refused with the field and value that are wrong", () => {
  assert.throws(() => resolve({ paramDtype: "f64" }), {
    name: "RangeError",
    message:
      'DistributedDataParallel: mixedPrecision.paramDtype must be one of f32, bf16, f16, got "f64"',
  });
  assert.throws(() => resolve({ reduceDtype: "i32" }), /reduceDtype must be one of .*"i32"/);
  assert.throws(() => resolve({ castForwardInputs: "yes" }), /castForwardInputs must be a boolean/);
  assert.throws(() => resolve({ bufferDtype: "bf16" }), /bufferDtype is not a field of the policy/);
  // DDP reduces in f32 unless told; FSDP2's default is the parameters' dtype.
  assert.deepEqual(resolve({ paramDtype: "bf16" }), {
    paramDtype: "bf16",
    reduceDtype: "f32",
    castForwardInputs: true,
  });
});

deviceTest(
  "fullyShard with paramDtype bf16 computes on bf16 parameters on the device",
  async (device) => {
    await dist.initProcessGroup({
      initMethod: "tcp://127.0.0.1:0",
      rank: 0,
      worldSize: 1,
      backend: "auto",
    });
    try {
      manualSeed(6);
      const exact = new nn.Linear(64, 16);
      const x = randn([8, 64]);
      const want = exact.forward(x).toArray() as Float32Array;
      manualSeed(6);
      const model = parallel.fullyShard(new nn.Linear(64, 16).to(device), {
        mpPolicy: { paramDtype: "bf16" },
      });
      const y = model.forward(x.to(device));
      assert.equal(y.dtype, "bf16");
      // Operands rounded to bf16 (8 significant bits, 2^-9 relative): an error far above f32's.
      const err = maxRelativeError(y.to("f32").toArray() as Float32Array, want);
      assert.ok(err > 1e-4 && err <= 2e-2, `bf16 rel err ${err}`);
      await model.backward(y.to("f32").sum());
      for (const p of model.parameters()) {
        assert.equal(p.dtype, "f32");
        assert.equal(p.grad?.dtype, "f32");
        assert.equal(p.device, device);
      }
    } finally {
      await dist.destroyProcessGroup();
    }
  },
);
