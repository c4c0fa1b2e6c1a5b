// The device seam: devices registered from outside src/ (a counting one that delegates to cpu, and
// a NULL-style one that refuses every kernel) serve every op, optimizer step and copy through the
// public Tensor API, found by name.

import assert from "node:assert/strict";
import {
  type DeviceBackend,
  F,
  getDevice,
  type Kernels,
  NativeError,
  optim,
  registerDevice,
  type Tensor,
  tensor,
  zeros,
} from "../../mod.ts";
import { Status } from "../../ffi/dtrain.ts";

/** Calls per kernel and per copy direction on the "counting" device. */
const calls = new Map<string, number>();
const count = (name: string) => calls.set(name, (calls.get(name) ?? 0) + 1);

/** A device backed by cpu memory that counts every call before delegating it to cpu. */
function countingDevice(): DeviceBackend {
  const cpu = getDevice("cpu");
  const kernels = {} as Record<string, unknown>;
  for (const [name, kernel] of Object.entries(cpu.kernels)) {
    const call = kernel as (...args: unknown[]) => number;
    kernels[name] = (...args: unknown[]) => {
      count(name);
      return call(...args);
    };
  }
  return {
    name: "counting",
    isHostMemory: false, // its own memory as far as the layers above can tell, so they copy in and out
    kernels: kernels as unknown as Kernels,
    alloc: (nbytes, zero) => (count("alloc"), cpu.alloc(nbytes, zero)),
    free: (ptr) => (count("free"), cpu.free(ptr)),
    allocatedBytes: () => 0, // its blocks come from cpu's allocator, which counts them
    copyIn: (dst, src, nbytes) => (count("copyIn"), cpu.copy(dst, src, nbytes)),
    copyOut: (dst, src, nbytes) => (count("copyOut"), cpu.copy(dst, src, nbytes)),
    copyInAsync: (copies) => (count("copyInAsync"), cpu.copyInAsync(copies)),
    copy: (dst, src, nbytes) => (count("copy"), cpu.copy(dst, src, nbytes)),
    check: (status) => cpu.check(status),
  };
}

/** Like tinygrad's NULL device: memory and copies work, every kernel is refused. */
function refusingDevice(): DeviceBackend {
  const cpu = getDevice("cpu");
  let refused = "";
  const kernels = {} as Record<string, unknown>;
  for (const name of Object.keys(cpu.kernels)) {
    kernels[name] = () => {
      refused = name;
      return Status.EUNSUPPORTED;
    };
  }
  return {
    ...cpu,
    name: "refusing",
    kernels: kernels as unknown as Kernels,
    allocatedBytes: () => 0,
    check(status) {
      if (status !== Status.OK) {
        throw new NativeError(status, `refusing device: kernel ${refused} is not implemented`);
      }
    },
  };
}

/** Asserts that `fn` throws a `kind` whose message contains `text`. */
function throwsWith(
  fn: () => unknown,
  kind: abstract new (...args: never[]) => Error,
  text: string,
): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof kind, `expected a ${kind.name}, got ${e}`);
    assert.ok((e as Error).message.includes(text), `"${(e as Error).message}" lacks "${text}"`);
    return true;
  });
}

registerDevice("counting", countingDevice);
registerDevice("refusing", refusingDevice);

/** One SGD step of a tiny classifier on `device`: returns the loss and the updated weight. */
function step(device: string): { loss: number; weight: Float32Array; t: Tensor } {
  const x = tensor([[0.5, -1, 2], [1.5, 0.25, -0.75]], undefined, { device });
  const w = tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]], undefined, {
    device,
    requiresGrad: true,
  });
  const b = tensor([0.01, -0.02], [2], { device, requiresGrad: true });
  const y = tensor([1, 0], [2], { dtype: "i32", device });
  const opt = new optim.SGD([w, b], { lr: 0.5, momentum: 0.9 });
  const logits = F.linear(x, w, b).relu().mul(2);
  const loss = F.crossEntropy(logits, y);
  loss.backward();
  opt.step();
  return { loss: loss.item(), weight: w.toArray() as Float32Array, t: w };
}

Deno.test("a registered device serves a training step (linear, relu, cross-entropy, SGD) through its kernel table", () => {
  calls.clear();
  const onCpu = step("cpu");
  assert.deepStrictEqual(calls.size, 0, "the cpu run must not touch the counting device");
  const onDevice = step("counting");
  assert.deepStrictEqual(onDevice.t.device, "counting");
  assert.deepStrictEqual(onDevice.t.grad!.device, "counting");
  assert.deepStrictEqual(onDevice.loss, onCpu.loss);
  assert.deepStrictEqual(onDevice.weight, onCpu.weight);
  for (const kernel of ["linearForward", "linearBackward", "crossEntropy", "sgdStep", "unary"]) {
    assert.ok((calls.get(kernel) ?? 0) > 0, `${kernel} did not go through the device`);
  }
  assert.deepStrictEqual(calls.get("copyIn"), 4, "one host-to-device copy per tensor() call");
});

Deno.test("to() moves a tensor to a registered device and back; the gradient flows across", () => {
  calls.clear();
  const x = tensor([1, 2, 3], [3], { requiresGrad: true });
  const y = x.to("counting");
  assert.deepStrictEqual(y.device, "counting");
  assert.deepStrictEqual(calls.get("copyIn"), 1);
  y.mul(y).sum().backward();
  assert.deepStrictEqual(x.grad!.device, "cpu");
  assert.deepStrictEqual(x.grad!.toArray(), new Float32Array([2, 4, 6]));
  assert.deepStrictEqual(calls.get("copyOut"), 1, "the gradient came back through copyOut");
  assert.deepStrictEqual(calls.get("binary"), 1);
  assert.deepStrictEqual(y.to("cpu").toArray(), new Float32Array([1, 2, 3]));
  assert.deepStrictEqual(y.to("counting").device, "counting", "to() its own device is a view");
});

Deno.test("a device that refuses every kernel fails each op with its own error, not cpu's", () => {
  const t = tensor([1, 2, 3, 4], [2, 2], { device: "refusing" });
  assert.deepStrictEqual(t.toArray(), new Float32Array([1, 2, 3, 4]), "copies still work");
  assert.deepStrictEqual(zeros([2], { device: "refusing" }).toArray(), new Float32Array([0, 0]));
  const refused: [string, () => unknown][] = [
    ["unary", () => t.add(1)],
    ["binary", () => t.mul(t)],
    ["matmul", () => t.matmul(t)],
    ["sumAxis", () => t.sum()],
    ["softmax", () => t.softmax()],
    ["fillF32", () => t.fill_(0)],
    ["copyStrided", () => t.t().contiguous()],
    ["castF32I32", () => t.to("i32")],
  ];
  for (const [kernel, op] of refused) {
    throwsWith(op, NativeError, `kernel ${kernel} is not implemented`);
  }
});

Deno.test("ops refuse operands on different devices, naming both", () => {
  const a = tensor([1, 2]), b = tensor([1, 2], [2], { device: "counting" });
  throwsWith(() => a.add(b), Error, "tensors on different devices (cpu and counting)");
  throwsWith(() => a.matmul(b.reshape(2, 1)), Error, "different devices");
});

Deno.test("registerDevice refuses a taken or malformed name; an unknown device lists the registered ones", () => {
  throwsWith(() => registerDevice("cpu", countingDevice), RangeError, `"cpu" is registered`);
  throwsWith(() => registerDevice("Bad Name", countingDevice), RangeError, "lowercase word");
  throwsWith(
    () => tensor([1], [1], { device: "tpu:0" }),
    Error,
    `device "tpu:0" is not available in this build (registered: cpu, cuda, emu, counting, refusing)`,
  );
});
