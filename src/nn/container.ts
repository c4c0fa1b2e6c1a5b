/** Containers: `Sequential`, and the `MLP` built on it. @module */

import type { Tensor } from "../tensor/tensor.ts";
import { Dropout, GELU, Linear, ReLU } from "./layers.ts";
import { Module } from "./module.ts";

/**
 * Runs its modules in order; they are named "0", "1", ... as in PyTorch, so state dicts match.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn } from "../../mod.ts";
 * const model = new nn.Sequential(new nn.Linear(784, 512), new nn.ReLU(), new nn.Linear(512, 10));
 * assert.deepEqual(Object.keys(model.stateDict()), ["0.weight", "0.bias", "2.weight", "2.bias"]);
 * ```
 */
export class Sequential extends Module {
  [index: number]: Module;
  /** How many modules it holds. */
  readonly length: number;

  /** @param modules The modules, in order. */
  constructor(...modules: Module[]) {
    super();
    modules.forEach((m, i) => {
      if (!(m instanceof Module)) throw new TypeError(`Sequential: argument ${i} is not a Module`);
      this[i] = m;
    });
    this.length = modules.length;
  }

  /** Feeds x through every module. */
  forward(x: Tensor): Tensor {
    let out = x;
    for (let i = 0; i < this.length; i++) out = this[i].forward(out);
    return out;
  }
}

/** Options of {@linkcode MLP}. */
export interface MLPOptions {
  /** Activation between layers (default "relu"). */
  activation?: "relu" | "gelu";
  /** Dropout probability after each activation (default 0: none). */
  dropout?: number;
  /** Whether the linear layers have biases (default true). */
  bias?: boolean;
}

/**
 * A multi-layer perceptron: Linear layers of the given sizes with an activation between them.
 * `new MLP([784, 512, 512, 10])` is `Sequential(Linear(784,512), ReLU(), Linear(512,512), ReLU(),
 * Linear(512,10))`, with the same state-dict names as that PyTorch model.
 */
export class MLP extends Sequential {
  /**
   * @param sizes Input size, hidden sizes, output size (at least two numbers).
   * @param options See {@linkcode MLPOptions}.
   */
  constructor(sizes: readonly number[], options: MLPOptions = {}) {
    if (sizes.length < 2) {
      throw new RangeError(
        `MLP: needs at least an input and an output size, got [${sizes.join(", ")}]`,
      );
    }
    const activation = options.activation ?? "relu";
    if (activation !== "relu" && activation !== "gelu") {
      throw new RangeError(`MLP: unknown activation "${activation}"`);
    }
    const layers: Module[] = [];
    for (let i = 0; i + 1 < sizes.length; i++) {
      layers.push(new Linear(sizes[i], sizes[i + 1], { bias: options.bias ?? true }));
      if (i + 2 < sizes.length) {
        layers.push(activation === "relu" ? new ReLU() : new GELU());
        if (options.dropout) layers.push(new Dropout(options.dropout));
      }
    }
    super(...layers);
  }
}
