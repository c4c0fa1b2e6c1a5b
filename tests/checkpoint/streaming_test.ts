// A sharded save and load of a 256 MiB state in one process stream it: the resident set never
// rises by more than 10% of the state (no second copy of it is made), and the load restores
// every value (a checksum over each tensor).
import assert from "node:assert/strict";
import { loadSharded, saveSharded } from "../../src/checkpoint/mod.ts";
import { Linear } from "../../src/nn/layers.ts";
import { Sequential } from "../../src/nn/container.ts";
import { noGrad } from "../../src/tensor/autograd.ts";
import { canResetPeak, peakRiseMiB } from "./_resident.ts";

/** Four 4096×4096 f32 weights: 256 MiB. */
const LAYERS = 4, WIDTH = 4096;
const STATE_MIB = LAYERS * WIDTH * WIDTH * 4 / 2 ** 20;

function build(): Sequential {
  return new Sequential(
    ...Array.from({ length: LAYERS }, () => new Linear(WIDTH, WIDTH, { bias: false })),
  );
}

/** A sum over every element of every weight, weighted by position so that moves show. */
function checksums(model: Sequential): number[] {
  return Object.values(model.stateDict()).map((t) => {
    const values = t.toArray() as Float32Array;
    let sum = 0;
    for (let i = 0; i < values.length; i += 997) sum += values[i] * (1 + (i % 7));
    return sum;
  });
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
