// saveObject / loadObject (issue 23): a nanoGPT-shaped torch.save dict in one safetensors file.
// A GPT and its AdamW state round-trip and train on identically; the committed fixture, written by
// saveObject, is plain safetensors (its header parsed here) that PyTorch read back the same
// (nanogpt_object_torch.json); values that cannot be stored are refused, naming their path.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  CheckpointError,
  load,
  loadObject,
  OBJECT_METADATA_KEY,
  save,
  saveObject,
} from "../../src/checkpoint/mod.ts";
import { nn, optim, Tensor, tensor, tidy } from "../../mod.ts";
import { nanoGptObject } from "./_nanogpt_object.ts";
import { withTempDir } from "./_temp_dir.ts";

const fixtures = new URL("../fixtures/", import.meta.url);
const fixturePath = fileURLToPath(new URL("nanogpt_object.safetensors", fixtures));

/** `value` with every tensor replaced by its dtype, shape and values, for deepEqual. */
function plain(value: unknown): unknown {
  if (value instanceof Tensor) {
    return { dtype: value.dtype, shape: value.shape, data: Array.from(value.toArray()) };
  }
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

const CONFIG = { vocabSize: 16, blockSize: 4, nLayer: 1, nHead: 2, nEmbd: 8, bias: false };

/** One AdamW step of `model` on a fixed batch. */
function trainStep(model: nn.GPT, optimizer: optim.AdamW): void {
  tidy(() => {
    const x = tensor(Int32Array.of(1, 5, 9, 2, 7, 3, 3, 8), [2, 4], { dtype: "i32" });
    const y = tensor(Int32Array.of(5, 9, 2, 7, 3, 3, 8, 0), [2, 4], { dtype: "i32" });
    model.forward(x, y).loss.backward();
    optimizer.step();
    optimizer.zeroGrad();
  });
}

Deno.test(
  "saveObject/loadObject round-trip a nanoGPT checkpoint: GPT, AdamW with step counts, args",
  withTempDir((dir) => {
    const model = new nn.GPT(CONFIG);
    const optimizer = new optim.AdamW(model.parameters(), { lr: 6e-4, betas: [0.9, 0.95] });
    trainStep(model, optimizer);
    trainStep(model, optimizer);
    const checkpoint = {
      model: model.stateDict(),
      optimizer: optimizer.stateDict(),
      model_args: { n_layer: 1, n_head: 2, n_embd: 8, block_size: 4, bias: false, vocab_size: 16 },
      iter_num: 5,
      best_val_loss: 1.9,
      config: { out_dir: "out", init_from: "scratch", compile: false, wandb_run_name: null },
    };
    saveObject(`${dir}/ckpt.safetensors`, checkpoint);
    const ckpt = loadObject<typeof checkpoint>(`${dir}/ckpt.safetensors`);
    assert.deepEqual(plain(ckpt), plain(checkpoint));
    assert.equal(ckpt.model["lm_head.weight"], ckpt.model["transformer.wte.weight"], "tied: one");
    assert.deepEqual(
      Object.values(ckpt.optimizer.state).map((s) => s.step),
      Object.values(checkpoint.optimizer.state).map(() => 2),
    );

    const resumed = new nn.GPT(CONFIG);
    resumed.loadStateDict(ckpt.model);
    const resumedOptimizer = new optim.AdamW(resumed.parameters(), { lr: 1 });
    resumedOptimizer.loadStateDict(ckpt.optimizer);
    trainStep(model, optimizer);
    trainStep(resumed, resumedOptimizer);
    assert.deepEqual(plain(resumed.stateDict()), plain(model.stateDict()), "the next step agrees");
    assert.deepEqual(plain(resumedOptimizer.stateDict()), plain(optimizer.stateDict()));
  }),
);

/** The header of a safetensors file, parsed by hand as any reader would. */
function readHeader(path: string): { header: Record<string, unknown>; dataBytes: number } {
  const bytes = Deno.readFileSync(path);
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  return { header, dataBytes: bytes.length - 8 - n };
}

Deno.test("the saveObject fixture is plain safetensors: tensors by joined path, the rest in __metadata__", () => {
  const { header, dataBytes } = readHeader(fixturePath);
  const { __metadata__: metadata, ...entries } = header as Record<string, never>;
  assert.deepEqual(Object.keys(metadata), [OBJECT_METADATA_KEY]);
  assert.equal(typeof metadata[OBJECT_METADATA_KEY], "string");
  assert.deepEqual(Object.keys(entries).sort(), [
    "model.transformer.h.0.ln_1.weight",
    "model.transformer.wpe.weight",
    "model.transformer.wte.weight", // lm_head.weight is the same tensor: stored once
    "optimizer.state.0.exp_avg",
    "optimizer.state.0.exp_avg_sq",
    "optimizer.state.1.exp_avg",
    "optimizer.state.1.exp_avg_sq",
    "tokens",
  ]);
  let end = 0;
  for (const [name, entry] of Object.entries(entries) as [string, Record<string, number[]>][]) {
    const [begin, stop] = entry.data_offsets;
    assert.equal(begin, end, `${name} follows the previous tensor`);
    const numel = entry.shape.reduce((a, b) => a * b, 1);
    assert.equal(stop - begin, numel * 4, `${name}: 4 bytes per element`);
    assert.equal(entry.dtype, name === "tokens" ? "I32" : "F32", `${name}: dtype`);
    end = stop;
  }
  assert.equal(end, dataBytes, "the tensors fill the data region");
});

Deno.test("loadObject reads the fixture as PyTorch's safetensors.torch.load_file read it", () => {
  const torch = JSON.parse(
    Deno.readTextFileSync(new URL("nanogpt_object_torch.json", fixtures)),
  ) as {
    tensors: Record<string, { dtype: string; shape: number[]; data: number[] }>;
    metadataKeys: string[];
    structure: unknown;
  };
  assert.deepEqual(torch.metadataKeys, [OBJECT_METADATA_KEY]);
  const { tensors, metadata } = load(fixturePath);
  assert.deepEqual(JSON.parse(metadata[OBJECT_METADATA_KEY]), torch.structure);
  const dtypes: Record<string, string> = { f32: "torch.float32", i32: "torch.int32" };
  assert.deepEqual(Object.keys(tensors).sort(), Object.keys(torch.tensors));
  for (const [name, t] of Object.entries(tensors)) {
    const want = torch.tensors[name];
    assert.deepEqual([dtypes[t.dtype], t.shape, Array.from(t.toArray())], [
      want.dtype,
      want.shape,
      want.data,
    ], name);
  }
  const object = loadObject(fixturePath);
  assert.deepEqual(plain(object), plain(nanoGptObject()));
  const model = object.model as Record<string, Tensor>;
  assert.equal(model["lm_head.weight"], model["transformer.wte.weight"]);
});

Deno.test(
  "saveObject reproduces the fixture byte for byte",
  withTempDir((dir) => {
    saveObject(`${dir}/again.safetensors`, nanoGptObject());
    assert.deepEqual(Deno.readFileSync(`${dir}/again.safetensors`), Deno.readFileSync(fixturePath));
  }),
);

Deno.test(
  "saveObject round-trips keys holding '.' or '__proto__', special numbers and empties",
  withTempDir((dir) => {
    const t = tensor([1, 2]);
    const tricky = JSON.parse('{"__proto__": {"x": 1}}');
    tricky["a.b"] = { "c.d": t, "": [] };
    const obj = {
      tricky,
      numbers: [NaN, Infinity, -Infinity, -0, 0, 5e-324, Number.MAX_VALUE],
      empty: {},
      "top.level": "dots",
    };
    saveObject(`${dir}/o.safetensors`, obj);
    const back = loadObject(`${dir}/o.safetensors`);
    assert.deepEqual(plain(back), plain(obj));
    const loadedTricky = back.tricky as Record<string, unknown>;
    assert.ok(Object.hasOwn(loadedTricky, "__proto__"), "an own key, not the prototype");
    assert.equal(Object.getPrototypeOf(loadedTricky), Object.prototype);
    assert.deepEqual(Object.keys(load(`${dir}/o.safetensors`).tensors), ["tricky.a.b.c.d"]);
  }),
);

Deno.test(
  "saveObject refuses what it cannot store, naming the path, and writes nothing",
  withTempDir((dir) => {
    const path = `${dir}/bad.safetensors`;
    const cycle: Record<string, unknown> = { a: [1] };
    (cycle.a as unknown[]).push({ back: cycle });
    const sparse = [1];
    sparse[2] = 3;
    const disposed = tensor([1]);
    disposed.dispose();
    const cases: [unknown, string][] = [
      [{ config: { f: () => 1 } }, "config.f is a function"],
      [{ config: { lr: undefined } }, "config.lr is undefined"],
      [new Map(), "the top level must be a plain object, got a Map"],
      [{ opt: { state: new Map([[0, 1]]) } }, "opt.state is a Map"],
      [{ opt: { sets: [new Set()] } }, "opt.sets[0] is a Set"],
      [{ iter: 5n }, "iter is a BigInt (5n)"],
      [{ at: new Date(0) }, "at is a Date"],
      [{ raw: new Float32Array(2) }, "raw is a Float32Array (store it as a tensor)"],
      [{ list: sparse }, "list[1] is an empty slot"],
      [cycle, "a[1].back refers back to the top level (a cycle)"],
      [
        { "x.y": { "z": tensor([1]) }, x: { "y.z": tensor([2]) } },
        'the tensors at ["x.y"].z and x["y.z"] would both be named "x.y.z"',
      ],
      [{ __metadata__: tensor([1]) }, 'would be named "__metadata__", which is reserved'],
      [{ m: { w: disposed } }, "the tensor at m.w was disposed"],
      [{ s: { [Symbol("k")]: 1 } }, "s has symbol keys"],
      [[1, 2], "the top level must be a plain object, got an Array"],
    ];
    for (const [obj, message] of cases) {
      assert.throws(() => saveObject(path, obj as object), (error: Error) => {
        assert.ok(error instanceof CheckpointError, `${message}: ${error}`);
        assert.ok(error.message.startsWith(`${path}: cannot save: `), error.message);
        assert.ok(error.message.includes(message), `expected "${message}" in: ${error.message}`);
        return true;
      });
      assert.throws(() => Deno.statSync(path), Deno.errors.NotFound, "nothing written");
    }
  }),
);

Deno.test(
  "loadObject refuses a plain safetensors file and structures that do not fit the tensors",
  withTempDir((dir) => {
    const path = `${dir}/f.safetensors`;
    const t = () => ({ w: tensor([1, 2]) });
    const attempt = (metadata?: Record<string, string>) => {
      save(path, t(), metadata);
      return () => loadObject(path);
    };
    assert.throws(
      attempt({ format: "pt" }),
      /no "dtrain\.object" in __metadata__: not written by saveObject \(read a plain safetensors file with load\(\)\)/,
    );
    const structure = (s: object) => ({ [OBJECT_METADATA_KEY]: JSON.stringify(s) });
    const good = { version: 1, value: { w: null }, tensors: [[["w"], "w"]], numbers: [] };
    assert.deepEqual(plain(attempt(structure(good))()), { w: plain(tensor([1, 2])) });
    assert.throws(
      attempt({ [OBJECT_METADATA_KEY]: "{" }),
      /the object structure is not valid JSON/,
    );
    assert.throws(
      attempt(structure({ ...good, version: 2 })),
      /not version 1 with an object value/,
    );
    assert.throws(
      attempt(structure({ ...good, tensors: [] })),
      /tensors "w" have no place in the object/,
    );
    assert.throws(attempt(structure({ ...good, tensors: [[["v"], "w"]] })), /has no place v$/);
    assert.throws(
      attempt(structure({ ...good, tensors: [[["w"], "v"]] })),
      /places tensor "v" at w, but the file has no such tensor/,
    );
    assert.throws(attempt(structure({ ...good, value: { w: 1 } })), /places two values at w/);
    assert.throws(
      attempt(structure({ ...good, numbers: [[["w"], "1"]] })),
      /the number at w is "1", not a special one/,
    );
  }),
);
