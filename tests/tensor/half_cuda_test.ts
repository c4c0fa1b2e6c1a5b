// bf16 and f16 on an accelerator (emu always, cuda where a GPU is): the same PyTorch bits as on
// cpu (tests/fixtures/gen_half.py), made and rounded on the device, read back through a copy.

import assert from "node:assert/strict";
import { allocatedBytes, full, manualSeed, ones, randn, tensor, tidy, zeros } from "../../mod.ts";
import { assertBits, bits16, checkConversions, f32Of, fixture } from "./_half_fixture.ts";
import { deviceTest } from "../_harness/devices.ts";

deviceTest("f32 to bf16 and f16, and back, have PyTorch's bits for every fixture value", (dev) => {
  checkConversions(dev);
});

deviceTest("bf16 and f16 made on the device equal the cpu ones bit for bit", (dev) => {
  const values = fixture.random.values.f32;
  for (const dtype of ["bf16", "f16"] as const) {
    const onCpu = bits16(f32Of(values, "cpu").to(dtype));
    const made = tensor(f32Of(values, "cpu").toArray(), [values.length], { dtype, device: dev });
    assert.equal(made.device, dev);
    assertBits(bits16(made), onCpu, `tensor() on ${dev}`);
    assertBits(bits16(made.to("cpu")), onCpu, `moved to cpu from ${dev}`);
    assertBits(bits16(made.to("cpu").to(dev)), onCpu, `moved back to ${dev}`);
    assertBits(
      bits16(full([2], 65519, { dtype, device: dev })),
      bits16(full([2], 65519, { dtype })),
      "full",
    );
    assertBits(bits16(ones([3], { dtype, device: dev })), bits16(ones([3], { dtype })), "ones");
    assertBits(bits16(zeros([3], { dtype, device: dev })), [0, 0, 0], "zeros");
    const filled = zeros([3], { dtype, device: dev }).fill_(0.1);
    assertBits(bits16(filled), bits16(full([3], 0.1, { dtype })), "fill_");
    manualSeed(3);
    const drawn = randn([64], { dtype, device: dev });
    manualSeed(3);
    assertBits(bits16(drawn), bits16(randn([64], { device: dev }).to(dtype)), `randn on ${dev}`);
  }
});

deviceTest(
  "item, toArray, tolist and printing read a device's bf16 and f16 through a copy",
  (dev) => {
    const h = tensor([[1, 2.5], [1 / 3, -0]], [2, 2], { dtype: "bf16", device: dev });
    assert.deepEqual(h.tolist(), [[1, 2.5], [0.333984375, -0]]);
    assert.deepEqual(Array.from(h.t().toArray()), [1, 0.333984375, 2.5, -0]);
    assert.equal(h.select(0, 1).select(0, 0).item(), 0.333984375);
    assert.ok(Number.isNaN(tensor([NaN], [1], { dtype: "f16", device: dev }).item()));
    assert.equal(
      String(tensor([1.0078, 3.1406], [2], { dtype: "bf16", device: dev })),
      `tensor([1.0078, 3.1406], device='${dev}', dtype=bf16)`,
    );
    assert.equal(
      String(tensor([1e-5, 3e4, 1 / 3], [3], { dtype: "f16", device: dev })),
      `tensor([1.0014e-05, 3.0000e+04, 3.3325e-01], device='${dev}', dtype=f16)`,
    );
    const bits = tensor(Uint16Array.of(0x3f80, 0xc049), [2], { device: dev });
    assert.deepEqual(Array.from(bits.view("bf16").toArray()), [1, -3.140625]);
    assert.equal(bits.view("bf16").device, dev);
  },
);

deviceTest("making, reading and printing bf16 and f16 leave no device memory behind", (dev) => {
  const x = f32Of(fixture.random.values.f32, "cpu").toArray() as Float32Array;
  const before = allocatedBytes();
  for (const dtype of ["bf16", "f16"] as const) {
    const made = [
      tensor(x, [x.length], { dtype, device: dev }),
      full([5], 2, { dtype, device: dev }),
      randn([5], { dtype, device: dev }),
    ];
    for (const t of made) {
      t.toArray();
      // The views share the tensor's block; tidy disposes them.
      tidy(() => {
        t.select(0, 0).item();
        String(t.narrow(0, 1, 3).reshape(3, 1).t());
        t.view("u16").toArray();
      });
      t.dispose();
    }
  }
  assert.equal(allocatedBytes(), before);
});
