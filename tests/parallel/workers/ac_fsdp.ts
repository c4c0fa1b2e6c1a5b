/**
 * Worker for ac_fsdp_test.ts: a tiny nn.GPT trained 3 AdamW steps with fullyShard per block (or
 * per attention and MLP) and on the root, plain and with activation checkpointing applied before
 * or after fullyShard (see Order); each run reports its losses, this rank's gradient rows of the
 * last step and the final weights. Rank 0 also trains one process on the whole batch.
 * @module
 */

import {
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import { GPT } from "../../../src/nn/gpt.ts";
import { AdamW } from "../../../src/optim/adamw.ts";
import {
  applyActivationCheckpointing,
  fullStateDict,
  fullyShard,
  localShard,
} from "../../../src/parallel/mod.ts";
import { backwardAsync } from "../../../src/tensor/autograd.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { tidyAsync } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { runWorker } from "../../_harness/worker.ts";

// No biases and no dropout: a bias without gradient gets only float noise, which AdamW turns into
// lr-sized steps; dropout masks drawn per rank cannot equal one process's.
const CONFIG = { vocabSize: 64, blockSize: 16, nLayer: 2, nHead: 4, nEmbd: 32, bias: false };
const ROWS = 2, STEPS = 3;

/** Every value of each named tensor. */
type Values = Record<string, number[]>;

function build(): GPT {
  manualSeed(11);
  return new GPT(CONFIG);
}

/** The loss of rows `from..to` of step `step`'s global batch. */
function loss(model: GPT, step: number, from: number, to: number): Tensor {
  const V = CONFIG.vocabSize, T = CONFIG.blockSize, n = (to - from) * T;
  const token = (row: number, t: number) => (step * 11 + row * 5 + t * t * 3 + (row >> 1)) % V;
  const xs = Int32Array.from({ length: n }, (_, i) => token(from + Math.floor(i / T), i % T));
  const ys = Int32Array.from({ length: n }, (_, i) => token(from + Math.floor(i / T), i % T + 1));
  return model.forward(tensor(xs, [to - from, T]), tensor(ys, [to - from, T])).loss;
}

const optimizer = (params: Tensor[]) => new AdamW(params, { lr: 0.02, weightDecay: 0.1 });
const values = (state: Record<string, Tensor>): Values =>
  Object.fromEntries(Object.entries(state).map(([k, t]) => [k, Array.from(t.toArray())]));

/**
 * How FSDP and activation checkpointing are composed: "none" (no AC), "acFirst" (torchtitan's
 * order), "fsdpFirst" (fullyShard per block, then AC over the sharded blocks), "fsdpInside"
 * (fullyShard on each block's attention and MLP, then AC per block: two groups in one region),
 * "nested" (as "fsdpInside", with the attention and MLP checkpointed too, inside their blocks').
 */
export type Order = "none" | "acFirst" | "fsdpFirst" | "fsdpInside" | "nested";

/** FSDP on this rank's rows, composed with activation checkpointing as `order` says. */
async function sharded(order: Order) {
  const rank = getRank();
  const model = build();
  const ac = () => applyActivationCheckpointing(model, { mode: "full" });
  const wrapped = order === "acFirst" ? ac() : [];
  for (const block of model.transformer.h) {
    if (order === "fsdpInside" || order === "nested") {
      [block.attn, block.mlp].forEach((m) => fullyShard(m));
    } else fullyShard(block);
  }
  const root = fullyShard(model);
  if (order === "nested") {
    applyActivationCheckpointing(model, { mode: "full", blocks: (n) => /\.(attn|mlp)$/.test(n) });
  }
  if (order !== "none" && order !== "acFirst") wrapped.push(...ac());
  const opt = optimizer(root.parameters());
  const losses: number[] = [];
  let grads: Record<string, { rowStart: number; rows: number; shape: number[]; values: number[] }> =
    {};
  for (let step = 0; step < STEPS; step++) {
    await tidyAsync(async () => {
      const l = loss(model, step, rank * ROWS, (rank + 1) * ROWS);
      losses.push(l.item());
      await root.backward(l);
      grads = Object.fromEntries(
        [...root.namedParameters()].map(([name, p]) => {
          const { rowStart, rows, shape } = localShard(p);
          return [name, {
            rowStart,
            rows,
            shape: [...shape],
            values: Array.from(p.grad!.toArray()),
          }];
        }),
      );
      opt.step();
      opt.zeroGrad();
    });
  }
  return { wrapped, losses, grads, final: values(await fullStateDict(root)) };
}

/** One process on the whole batch: losses, last gradients and final weights. */
async function single(worldSize: number) {
  const model = build();
  const opt = optimizer(model.parameters());
  const losses: number[] = [];
  let grads: Values = {};
  for (let step = 0; step < STEPS; step++) {
    await tidyAsync(async () => {
      const l = loss(model, step, 0, worldSize * ROWS);
      losses.push(l.item());
      await backwardAsync(l);
      grads = Object.fromEntries(
        [...model.namedParameters()].map(([n, p]) => [n, Array.from(p.grad!.toArray())]),
      );
      opt.step();
      opt.zeroGrad();
    });
  }
  return { losses, grads, final: values(model.stateDict()) };
}

await runWorker(async () => {
  await initProcessGroup({
    backend: "gloo",
    timeoutMs: Number(Deno.env.get("TEST_TIMEOUT_MS") ?? 20_000),
  });
  try {
    const orders: Order[] = ["none", "acFirst", "fsdpFirst", "fsdpInside", "nested"];
    const runs: Record<string, unknown> = {};
    for (const order of orders) runs[order] = await sharded(order);
    const reference = getRank() === 0 ? await single(getWorldSize()) : null;
    return { runs, reference, rows: ROWS };
  } finally {
    await destroyProcessGroup();
  }
});
