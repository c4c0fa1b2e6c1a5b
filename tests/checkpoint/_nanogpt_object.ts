/**
 * A small checkpoint object shaped like nanoGPT's `torch.save` dict (model, optimizer, model_args,
 * iter_num, best_val_loss, config), with fixed values: what gen_object.ts writes to
 * tests/fixtures/nanogpt_object.safetensors and object_test.ts expects back.
 * @module
 */

import { type Tensor, tensor } from "../../mod.ts";

/** `n` values `start, start + 0.25, ...` (exact in f32) as a tensor of `shape`. */
function steps(shape: number[], start: number): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return tensor(Float32Array.from({ length: n }, (_, i) => start + i * 0.25), shape);
}

/**
 * The object. The token embedding is tied to the head, as in nanoGPT, so one tensor stands at
 * `model["transformer.wte.weight"]` and `model["lm_head.weight"]`.
 */
export function nanoGptObject(): Record<string, unknown> {
  const wte = steps([4, 3], -1);
  const model = {
    "transformer.wte.weight": wte,
    "transformer.wpe.weight": steps([2, 3], 0.5),
    "transformer.h.0.ln_1.weight": steps([3], 1),
    "lm_head.weight": wte,
  };
  return {
    model,
    optimizer: {
      state: {
        0: { step: 5, exp_avg: steps([4, 3], 0.125), exp_avg_sq: steps([4, 3], 2) },
        1: { step: 5, exp_avg: steps([2, 3], -0.5), exp_avg_sq: steps([2, 3], 3) },
      },
      paramGroups: [
        { lr: 6e-4, betas: [0.9, 0.95], eps: 1e-8, weightDecay: 0.1, params: [0, 1] },
        { lr: 6e-4, betas: [0.9, 0.95], eps: 1e-8, weightDecay: 0, params: [2] },
      ],
    },
    model_args: {
      n_layer: 1,
      n_head: 1,
      n_embd: 3,
      block_size: 2,
      bias: false,
      vocab_size: 4,
      dropout: 0,
    },
    iter_num: 5,
    best_val_loss: 1.9,
    config: {
      out_dir: "out",
      init_from: "scratch",
      always_save_checkpoint: true,
      wandb_run_name: null,
      "gradient.accumulation.steps": 40,
      lr_history: [6e-4, Infinity, NaN, -0],
      nested: [[1, "two"], { three: [false] }],
    },
    tokens: tensor(Int32Array.of(3, 1, 4, 1, 5), [5], { dtype: "i32" }),
  };
}
