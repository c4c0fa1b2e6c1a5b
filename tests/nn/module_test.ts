/**
 * Module containers and the module tree: ModuleList / ModuleDict registration, the refusal of
 * modules in plain arrays and objects, PyTorch's printed form (layers.json `repr` cases), and
 * `forward` signatures of any shape.
 * @module
 */

import assert from "node:assert/strict";
import { nn, type Tensor, tensor, tidy } from "../../mod.ts";
import { loadCases } from "../_harness/fixtures.ts";

const reprs = new Map(
  loadCases<{ name: string; op: string; text: string }>("layers.json")
    .filter((c) => c.op === "repr")
    .map((c) => [c.name, c.text]),
);

class Block extends nn.Module {
  ln = new nn.LayerNorm(8);
  mlp = new nn.Sequential(new nn.Linear(8, 32), new nn.GELU(), new nn.Linear(32, 8));
  forward(x: Tensor): Tensor {
    return x.add(this.mlp.forward(this.ln.forward(x)));
  }
}

class Model extends nn.Module {
  wte = new nn.Embedding(256, 8);
  h = new nn.ModuleList<nn.Module>([new Block(), new Block(), new Block(), new nn.Identity()]);
  lnF = new nn.RMSNorm(8);
  heads = new nn.ModuleDict({
    lm: new nn.Linear(8, 256, { bias: false }),
    value: new nn.Linear(8, 1),
  });
  /** Takes a flag and returns a pair: allowed by Module's forward type. */
  forward(idx: Tensor, withValue: boolean): [Tensor, Tensor | null] {
    let x = this.wte.forward(idx);
    for (const block of this.h) x = block.forward(x);
    x = this.lnF.forward(x);
    return [this.heads.get("lm").forward(x), withValue ? this.heads.get("value").forward(x) : null];
  }
}

Deno.test("modules print PyTorch's repr text exactly", () => {
  const cases: [string, nn.Module][] = [
    ["repr_mlp", new nn.Sequential(new nn.Linear(784, 512), new nn.ReLU(), new nn.Linear(512, 10))],
    [
      "repr_layers",
      new nn.Sequential(
        new nn.LayerNorm(64),
        new nn.GELU(),
        new nn.GELU({ approximate: "tanh" }),
        new nn.Dropout(0.1),
        new nn.Flatten(),
        new nn.Embedding(1000, 64),
        new nn.Identity(),
        new nn.SiLU(),
        new nn.RMSNorm(64),
        new nn.RMSNorm([3, 4], { eps: 1e-6, elementwiseAffine: false }),
        new nn.Linear(4, 2, { bias: false }),
        new nn.LayerNorm([2, 5], { eps: 1e-12 }),
      ),
    ],
    ["repr_model", new Model()],
    ["repr_empty_list", new nn.ModuleList()],
  ];
  for (const [name, module] of cases) {
    assert.ok(reprs.has(name), `layers.json has ${name}`);
    assert.equal(String(module), reprs.get(name), name);
    assert.equal(Deno.inspect(module), reprs.get(name), `${name}: console.log prints the tree`);
  }
});

Deno.test("ModuleList and ModuleDict register their modules under PyTorch's names", () => {
  tidy(() => {
    const model = new Model();
    const names = Object.keys(model.stateDict());
    assert.deepEqual(names.slice(0, 3), ["wte.weight", "h.0.ln.weight", "h.0.ln.bias"]);
    assert.ok(names.includes("h.2.mlp.2.bias"));
    assert.deepEqual(names.slice(-4), [
      "lnF.weight",
      "heads.lm.weight",
      "heads.value.weight",
      "heads.value.bias",
    ]);
    assert.equal(model.parameters().length, 1 + 3 * 6 + 1 + 3);
    assert.deepEqual(
      [...model.namedModules()].map(([n]) => n).slice(0, 5),
      ["", "wte", "h", "h.0", "h.0.ln"],
    );
    assert.deepEqual([...model.children()].length, 4);
    const [logits, value] = model.forward(tensor([1, 2, 3], [3], { dtype: "i32" }), true);
    assert.deepEqual(logits.shape, [3, 256]);
    assert.deepEqual(value?.shape, [3, 1]);
  });
});

Deno.test("ModuleList supports append, insert, at and negative indices", () => {
  const list = new nn.ModuleList([new nn.ReLU()]);
  list.append(new nn.SiLU()).extend([new nn.Identity()]);
  list.insert(0, new nn.GELU());
  assert.deepEqual([...list].map((m) => m.constructor.name), ["GELU", "ReLU", "SiLU", "Identity"]);
  assert.equal(list.length, 4);
  assert.ok(list.at(-1) instanceof nn.Identity);
  assert.ok(list[1] instanceof nn.ReLU);
  assert.throws(() => list.at(4), /index 4 is out of range for 4 modules/);
  assert.throws(() => list.append({} as nn.Module), /module 4 is not a Module, got Object/);
  assert.throws(() => list.forward(), /ModuleList has no forward/);
});

Deno.test("ModuleDict keeps insertion order, refuses dotted names and names what it lacks", () => {
  const dict = new nn.ModuleDict([["training", new nn.ReLU()], ["b", new nn.SiLU()]]);
  assert.equal(dict.training, true, "a module named training does not clobber the flag");
  assert.deepEqual([...dict.keys()], ["training", "b"]);
  assert.ok(dict.pop("training") instanceof nn.ReLU);
  assert.equal(dict.length, 1);
  assert.throws(() => dict.set("a.b", new nn.ReLU()), /can't be empty or contain "\.", got "a.b"/);
  assert.throws(() => dict.get("c"), /no module named "c" \(has b\)/);
});

Deno.test("modules in a plain array or object are refused, naming the field (never dropped)", () => {
  tidy(() => {
    class Listed extends nn.Module {
      blocks = [new nn.Linear(4, 4), new nn.Linear(4, 4)];
      out = new nn.Linear(4, 4);
      forward(x: Tensor): Tensor {
        return this.out.forward(x);
      }
    }
    const listed = new Listed();
    for (
      const walk of [
        () => listed.parameters(),
        () => listed.stateDict(),
        () => [...listed.namedModules()],
      ]
    ) {
      assert.throws(
        walk,
        /Listed\.blocks is a plain array holding a Linear, which would not be registered .*use nn\.ModuleList/,
      );
    }
    class Keyed extends nn.Module {
      heads = { a: new nn.Linear(2, 2) };
      forward(x: Tensor): Tensor {
        return x;
      }
    }
    assert.throws(
      () => new Keyed().parameters(),
      /Keyed\.heads is a plain object .*use nn\.ModuleDict/,
    );
    class Params extends nn.Module {
      scales = [new nn.Parameter(tensor([1]))];
      forward(x: Tensor): Tensor {
        return x;
      }
    }
    assert.throws(
      () => new Params().stateDict(),
      /Params\.scales is a plain array holding a Parameter/,
    );
    class Plain extends nn.Module {
      sizes = [4, 4];
      config = { hidden: 4 };
      fc = new nn.Linear(4, 4);
      forward(x: Tensor): Tensor {
        return this.fc.forward(x);
      }
    }
    assert.equal(new Plain().parameters().length, 2, "arrays and objects of plain values are fine");
  });
});
