/**
 * Worker for fsdp_torch_test.ts: starts from the PyTorch reference's initial GPT
 * (tests/fixtures/fsdp_gpt_init.safetensors, made by gen_fsdp.py), wraps each block and then the
 * root with fullyShard, and trains this rank's equal slice of every global batch with AdamW in
 * nanoGPT's parameter groups, once plain and once with clipGradNorm, as the reference did in one
 * process. Reports each run's per-step loss on this rank, the gradient norms, and fullStateDict.
 * @module
 */

import { fileURLToPath } from "node:url";
import {
  checkpoint,
  dist,
  nn,
  optim,
  parallel,
  type Tensor,
  tensor,
  tidyAsync,
} from "../../../mod.ts";
import type { FixtureTensor } from "../../_harness/fixtures.ts";
import { runWorker } from "../../_harness/worker.ts";

/** One training run of the reference, as fsdp_gpt.json lists it. */
export interface ReferenceRun {
  name: string;
  /** The total norm the gradients were clipped to (0: no clipping). */
  clip: number;
  /** The safetensors file in tests/fixtures with the state dict after the last step. */
  final: string;
  /** The global mean loss before each step. */
  losses: number[];
  /** The total gradient norm clipGradNorm saw in each step (empty without clipping). */
  gradNorms: number[];
}

/** tests/fixtures/fsdp_gpt.json. */
export interface Reference {
  /** nanoGPT's GPTConfig. */
  config: {
    vocab_size: number;
    block_size: number;
    n_layer: number;
    n_head: number;
    n_embd: number;
    dropout: number;
    bias: boolean;
  };
  /** The safetensors file in tests/fixtures with the initial state dict. */
  init: string;
  adamw: { lr: number; betas: [number, number]; eps: number; weightDecay: number };
  /** Input tokens, [steps, global batch, block size]. */
  idx: FixtureTensor;
  /** Next tokens, the same shape. */
  targets: FixtureTensor;
  runs: ReferenceRun[];
}

const FIXTURES = new URL("../../fixtures/", import.meta.url);

/** A file in tests/fixtures as a path. */
export function fixturePath(name: string): string {
  return fileURLToPath(new URL(name, FIXTURES));
}

/** The reference's description, hyperparameters and batches. */
export function loadReference(): Reference {
  return JSON.parse(Deno.readTextFileSync(fixturePath("fsdp_gpt.json")));
}

/** The GPT with the reference's initial weights. */
export function initialModel(ref: Reference): nn.GPT {
  const c = ref.config;
  const model = new nn.GPT({
    vocabSize: c.vocab_size,
    blockSize: c.block_size,
    nLayer: c.n_layer,
    nHead: c.n_head,
    nEmbd: c.n_embd,
    dropout: c.dropout,
    bias: c.bias,
  });
  const { tensors } = checkpoint.load(fixturePath(ref.init));
  model.loadStateDict(tensors);
  for (const t of Object.values(tensors)) t.dispose();
  return model;
}

/** A PyTorch state dict in tests/fixtures, as arrays by name. */
export function torchState(file: string): Record<string, Float32Array> {
  const { tensors } = checkpoint.load(fixturePath(file));
  const out = Object.fromEntries(
    Object.entries(tensors).map(([name, t]) => [name, t.toArray() as Float32Array]),
  );
  for (const t of Object.values(tensors)) t.dispose();
  return out;
}

/**
 * AdamW over FSDP's shards in nanoGPT's `configure_optimizers` groups (decay on tensors of 2 or
 * more dimensions: shards keep theirs), with the reference's hyperparameters.
 */
export function referenceAdamW(params: Tensor[], ref: Reference): optim.AdamW {
  const { lr, betas, eps, weightDecay } = ref.adamw;
  return new optim.AdamW([
    { params: params.filter((p) => p.ndim >= 2), weightDecay },
    { params: params.filter((p) => p.ndim < 2), weightDecay: 0 },
  ], { lr, betas, eps });
}

/** Rows `rank·B .. (rank+1)·B` of step `step`'s global batch in `t`, as [B, blockSize] tokens. */
export function rows(t: FixtureTensor, step: number, rank: number, perRank: number): Tensor {
  const [, batch, length] = t.shape;
  const from = (step * batch + rank * perRank) * length;
  return tensor(Int32Array.from(t.data.slice(from, from + perRank * length)), [perRank, length], {
    dtype: "i32",
  });
}

async function train(ref: Reference, run: ReferenceRun) {
  const rank = dist.getRank(), size = dist.getWorldSize();
  const [steps, batch] = ref.idx.shape;
  if (batch % size !== 0) {
    throw new Error(`global batch ${batch} does not split over ${size} ranks`);
  }
  const perRank = batch / size;
  const model = initialModel(ref);
  const fullCount = model.numParameters();
  for (const block of model.transformer.h.children()) parallel.fullyShard(block);
  const sharded = parallel.fullyShard(model);
  const params = sharded.parameters();
  const optimizer = referenceAdamW(params, ref);
  const losses: number[] = [], norms: number[] = [];
  for (let step = 0; step < steps; step++) {
    await tidyAsync(async () => {
      const idx = rows(ref.idx, step, rank, perRank);
      const { loss } = sharded.forward(idx, rows(ref.targets, step, rank, perRank));
      losses.push(loss.item());
      await sharded.backward(loss);
      if (run.clip > 0) norms.push(nn.utils.clipGradNorm(params, run.clip));
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  const state = await parallel.fullStateDict(sharded);
  const final = Object.fromEntries(
    Object.entries(state).map(([name, t]) => [name, Array.from(t.toArray())]),
  );
  for (const t of Object.values(state)) t.dispose();
  return { name: run.name, losses, norms, final, fullCount, localCount: sharded.numParameters() };
}

// Only as a rank process: the test imports this file for the fixture's reader.
if (import.meta.main) {
  await runWorker(async () => {
    await dist.initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
    try {
      const ref = loadReference();
      const runs = [];
      for (const run of ref.runs) runs.push(await train(ref, run));
      return { runs };
    } finally {
      await dist.destroyProcessGroup();
    }
  });
}
