// BF16 and F16 safetensors: files PyTorch wrote load with their bits and are re-saved byte for
// byte; dtrain's own file is the one PyTorch read with identical bits (gen_half.py --check); a
// bf16 state dict loads into f32 parameters converted, and GPT.fromPretrained reads a GPT-2 in
// BF16 or F16 (tests/fixtures/gen_half.py, gen_half.ts).

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { checkpoint, nn, type Tensor, tensor } from "../../mod.ts";
import { CheckpointError, load, loadObject, save, saveObject } from "../../src/checkpoint/mod.ts";
import { assertBits, bits16, bits32, fixture } from "../tensor/_half_fixture.ts";
import { dtrainFileTensors } from "./_half_files.ts";
import { withTempDir } from "./_temp_dir.ts";

const FIXTURES = new URL("../fixtures/", import.meta.url);
const fixturePath = (name: string) => fileURLToPath(new URL(name, FIXTURES));

/** The raw bits of a tensor of any float dtype. */
function bitsOf(t: Tensor): ArrayLike<number> {
  return t.dtype === "f32" ? bits32(t) : bits16(t);
}

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

for (const [file, { sha256: digest, tensors: expected }] of Object.entries(fixture.files)) {
  Deno.test(`${file} (written as PyTorch lays it out) loads with its bits and re-saves identically`, async () => {
    const bytes = Deno.readFileSync(fixturePath(file));
    assert.equal(await sha256(bytes), digest, "the committed file is gen_half.py's");
    const { tensors, metadata } = load(fixturePath(file));
    assert.deepEqual(Object.keys(tensors).sort(), Object.keys(expected).sort());
    for (const [name, entry] of Object.entries(expected)) {
      const t = tensors[name];
      assert.equal(t.dtype, entry.dtype, name);
      assert.deepEqual(t.shape, entry.shape, name);
      assertBits(bitsOf(t), entry.bits, `${file} ${name}`);
    }
    withTempDir((dir) => {
      save(join(dir, "again.safetensors"), tensors, metadata);
      assert.deepEqual(Deno.readFileSync(join(dir, "again.safetensors")), bytes);
    })();
  });
}

Deno.test("dtrain's save of bf16 and f16 tensors is half_dtrain.safetensors, which PyTorch read", () => {
  withTempDir((dir) => {
    const path = join(dir, "half.safetensors");
    save(path, dtrainFileTensors(), { format: "pt" });
    assert.deepEqual(
      Deno.readFileSync(path),
      Deno.readFileSync(fixturePath(fixture.dtrainFile.file)),
      "gen_half.py --check read this file with PyTorch and found every bit",
    );
  })();
});

Deno.test("bf16 and f16 tensors on a device save through a host copy and load with their bits", () => {
  withTempDir((dir) => {
    const local = dtrainFileTensors();
    const onDevice = Object.fromEntries(
      Object.entries(local).map(([name, t]) => [name, t.to("emu")]),
    );
    // A strided view is written row-major, as f32 ones are.
    onDevice["bf16.t"] = local["bf16.values"].narrow(0, 0, 6).reshape(2, 3).t().to("emu");
    const path = join(dir, "device.safetensors");
    save(path, onDevice);
    const { tensors } = load(path);
    for (const [name, t] of Object.entries(onDevice)) {
      assert.equal(tensors[name].dtype, t.dtype);
      assertBits(bitsOf(tensors[name]), bitsOf(t), name);
    }
  })();
});

Deno.test("saveObject / loadObject keep bf16 and f16 tensors' dtype and bits", () => {
  withTempDir((dir) => {
    const t = dtrainFileTensors();
    const path = join(dir, "object.safetensors");
    saveObject(path, { model: { w: t["bf16.values"] }, extra: [t["f16.values"], 3] });
    const back = loadObject<{ model: { w: Tensor }; extra: [Tensor, number] }>(path);
    assert.equal(back.model.w.dtype, "bf16");
    assertBits(bits16(back.model.w), bits16(t["bf16.values"]), "bf16 in an object");
    assert.equal(back.extra[0].dtype, "f16");
    assertBits(bits16(back.extra[0]), bits16(t["f16.values"]), "f16 in an object");
    assert.equal(back.extra[1], 3);
  })();
});

Deno.test("load() checks a BF16 or F16 tensor's byte count at 2 bytes an element", () => {
  withTempDir((dir) => {
    for (const dtype of ["BF16", "F16"]) {
      const json = JSON.stringify({ w: { dtype, shape: [2, 3], data_offsets: [0, 24] } });
      const header = new TextEncoder().encode(json);
      const bytes = new Uint8Array(8 + header.length + 24);
      new DataView(bytes.buffer).setBigUint64(0, BigInt(header.length), true);
      bytes.set(header, 8);
      const path = join(dir, `${dtype}.safetensors`);
      Deno.writeFileSync(path, bytes);
      assert.throws(
        () => load(path),
        (e: unknown) =>
          e instanceof CheckpointError &&
          e.message.endsWith(
            `tensor "w" has data_offsets [0, 24] but shape [2, 3] ${dtype} needs 12 bytes`,
          ),
      );
    }
  })();
});

Deno.test("loadStateDict converts a bf16 or f16 state dict into f32 parameters, as PyTorch's copy_", () => {
  const model = new nn.Linear(3, 2);
  for (const dtype of ["bf16", "f16"] as const) {
    const state = {
      weight: tensor([[0.1, 0.2, 0.3], [1 / 3, 65519, -2]], [2, 3], { dtype }),
      bias: tensor([1e-3, -1e-3], [2], { dtype }),
    };
    model.loadStateDict(state);
    assert.equal(model.weight.dtype, "f32");
    assertBits(bits32(model.weight), bits32(state.weight.to("f32")), `${dtype} weight`);
    assertBits(bits32(model.bias!), bits32(state.bias.to("f32")), `${dtype} bias`);
  }
  // Other dtypes still have to match.
  assert.throws(
    () =>
      model.loadStateDict({ ...model.stateDict(), bias: tensor([1, 2], [2], { dtype: "i32" }) }),
    /size mismatch for bias: copying a param with shape \[2\] i32 from checkpoint, the shape in current model is \[2\] f32/,
  );
});

const HF_DIR = fixturePath("gpt2_hf");

for (const dtype of ["bf16", "f16"] as const) {
  Deno.test(`GPT.fromPretrained reads a GPT-2 stored in ${dtype.toUpperCase()} into f32 parameters`, () => {
    withTempDir((dir) => {
      Deno.copyFileSync(join(HF_DIR, "config.json"), join(dir, "config.json"));
      const { tensors } = checkpoint.load(join(HF_DIR, "model.safetensors"));
      const narrow = Object.fromEntries(
        Object.entries(tensors).map(([name, t]) => [name, t.to(dtype)]),
      );
      checkpoint.save(join(dir, "model.safetensors"), narrow, { format: "pt" });
      const model = nn.GPT.fromPretrained(dir);
      const params = model.stateDict();
      for (const [name, param] of Object.entries(params)) assert.equal(param.dtype, "f32", name);
      const wte = params["transformer.wte.weight"];
      assertBits(bits32(wte), bits32(narrow["wte.weight"].to("f32")), "wte, converted exactly");
      const cAttn = params["transformer.h.0.attn.c_attn.weight"];
      const stored = narrow["h.0.attn.c_attn.weight"].to("f32").t().contiguous();
      assertBits(bits32(cAttn), bits32(stored), "a Conv1D weight, transposed");
      const idx = tensor([[1, 2, 3, 4]], [1, 4], { dtype: "i32" });
      assert.ok(Array.from(model.eval().forward(idx).logits.toArray()).every(Number.isFinite));
    })();
  });
}
