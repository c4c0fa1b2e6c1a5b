// A sharded save and load of a 256 MiB state in one process stream it: the resident set never
// rises by more than 10% of the state (no second copy of it is made), and the load restores
// every value (a checksum over each tensor). So does the train job's one-file (DDP) snapshot's
// load, of weights and SGD momentum (one 64 MiB tensor each: a temporary copy of either would
// show).
import assert from "node:assert/strict";
import { loadSharded, saveSharded } from "../../src/checkpoint/mod.ts";
import { Linear } from "../../src/nn/layers.ts";
import { Sequential } from "../../src/nn/container.ts";
import { noGrad } from "../../src/tensor/autograd.ts";
import { SGD } from "../../src/optim/sgd.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { loadSnapshot, saveSnapshot } from "../../src/train/snapshot.ts";
import { canResetPeak, peakRiseMiB } from "./_resident.ts";

/** Four 4096×4096 f32 weights: 256 MiB. */
const LAYERS = 4, WIDTH = 4096;
const STATE_MIB = LAYERS * WIDTH * WIDTH * 4 / 2 ** 20;

function build(): Sequential {
  return new Sequential(
    ...Array.from({ length: LAYERS }, () => new Linear(WIDTH, WIDTH, { bias: false })),
  );
}

/** A sum over every 997th element, weighted by position so that moves show. */
function checksum(values: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < values.length; i += 997) sum += values[i] * (1 + (i % 7));
  return sum;
}

/** The checksum of every weight. */
function checksums(model: Sequential): number[] {
  return Object.values(model.stateDict()).map((t) => checksum(t.toArray() as Float32Array));
}

Deno.test({
  name: "a sharded save and load of a 256 MiB state raise the resident set by at most 10% of it",
  ignore: !canResetPeak,
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "dtrain_streaming_" });
    try {
      const model = build();
      const want = checksums(model);
      const saveRise = await peakRiseMiB(() => saveSharded(dir, { model }));
      assert.ok(
        saveRise <= STATE_MIB * 0.1,
        `the save raised the resident set by ${saveRise.toFixed(1)} MiB for ${STATE_MIB} MiB`,
      );
      noGrad(() => Object.values(model.stateDict()).forEach((t) => t.fill_(0)));
      const loadRise = await peakRiseMiB(() => loadSharded(dir, { model }));
      assert.ok(
        loadRise <= STATE_MIB * 0.1,
        `the load raised the resident set by ${loadRise.toFixed(1)} MiB for ${STATE_MIB} MiB`,
      );
      assert.deepEqual(checksums(model), want);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "a DDP snapshot's load of 64 MiB of weights and 64 MiB of momentum raises the resident set " +
    "by its momentum buffer and at most 10% of the state",
  ignore: !canResetPeak,
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "dtrain_streaming_" });
    try {
      const model = new Sequential(new Linear(WIDTH, WIDTH, { bias: false }));
      const optimizer = new SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
      const [weight] = model.parameters();
      // Two steps of a made-up gradient give every parameter a momentum buffer.
      for (let step = 0; step < 2; step++) {
        weight.grad = weight.detach().mul(0.5);
        optimizer.step();
      }
      const info = { epochsRun: 1, sampler: { epoch: 1, seed: 0 } };
      saveSnapshot(`${dir}/snapshot.safetensors`, model, optimizer, info);
      const want = [...checksums(model), ...momentumChecksums(optimizer)];
      const copy = new Sequential(new Linear(WIDTH, WIDTH, { bias: false }));
      const copyOptimizer = new SGD(copy.parameters(), { lr: 0.1, momentum: 0.9 });
      const rise = await peakRiseMiB(() =>
        loadSnapshot(`${dir}/snapshot.safetensors`, copy, copyOptimizer)
      );
      // The momentum buffer comes into being in the load and stays; beyond it, 10% of the state.
      const bufferMiB = WIDTH * WIDTH * 4 / 2 ** 20, stateMiB = 2 * bufferMiB;
      assert.ok(
        rise <= bufferMiB + stateMiB * 0.1,
        `the load raised the resident set by ${rise.toFixed(1)} MiB: its ${bufferMiB} MiB ` +
          `momentum buffer and ${(rise - bufferMiB).toFixed(1)} MiB (of ${stateMiB} MiB) beyond`,
      );
      assert.deepEqual([...checksums(copy), ...momentumChecksums(copyOptimizer)], want);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

/** The checksums of the momentum buffers, as `checksums` of the weights. */
function momentumChecksums(optimizer: SGD): number[] {
  return optimizer.paramGroups.flatMap((g) => g.params).map((p) => {
    const buffer = optimizer.state.get(p)!.momentumBuffer as Tensor;
    return checksum(buffer.toArray() as Float32Array);
  });
}
