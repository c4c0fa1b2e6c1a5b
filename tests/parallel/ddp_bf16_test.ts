// DDP's mixed precision across 2 and 3 real rank processes: `reduceDtype` "bf16" and "f16" reduce
// every bucket as PyTorch's bf16_compress_hook / fp16_compress_hook (cast down, divide by the world
// size there, sum with a rounding per step in rank order, widen back), checked bit for bit against
// that computation on the ranks' local gradients, at half the bytes of f32's in lastStats;
// `paramDtype` "bf16" computes the forward on bf16 copies with f32 gradients.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { type Half, halfReduce, roundTo } from "../distributed/workers/_half.ts";

const worker = new URL("./workers/ddp_bf16.ts", import.meta.url);

interface Run {
  grads: number[][];
  out: string;
  gradDtypes: string[];
  stats: { allReduceBytes: number; buckets: number };
  traceBytes: number;
}

for (const size of [2, 3]) {
  Deno.test(`DDP reduceDtype bf16 and f16 on ${size} ranks equal PyTorch's compress hooks computed by hand, at half the bytes`, async () => {
    const ranks = await runRanks({ worker, worldSize: size, timeoutMs: 90_000 });
    assertAllOk(ranks);
    const results = ranks.map((r) => r.result!);
    const local = results.map((r) => (r.runs as Record<string, number[][]>).local);
    const run = (r: number, name: string) => (results[r].runs as Record<string, Run>)[name];
    for (
      const [name, dtype] of [["bf16Reduce", "bf16"], ["f16Reduce", "f16"]] as [string, Half][]
    ) {
      local[0].forEach((_, p) => {
        // Each rank's bucket cast down and divided by the world size there, then summed.
        const compressed = local.map((g) =>
          g[p].map((x) => roundTo(dtype, roundTo(dtype, x) / size))
        );
        const want = halfReduce(compressed, "sum", dtype);
        for (let r = 0; r < size; r++) {
          assert.deepEqual(run(r, name).grads[p], want, `${name}: rank ${r} parameter ${p}`);
        }
      });
      const f32 = run(0, "f32").stats;
      assert.equal(run(0, name).stats.buckets, 4, "one bucket per parameter");
      assert.equal(run(0, name).stats.allReduceBytes * 2, f32.allReduceBytes, `${name}: bytes`);
      assert.equal(run(0, name).traceBytes, run(0, name).stats.allReduceBytes, `${name}: trace`);
    }
    assert.equal(run(0, "f32").traceBytes, run(0, "f32").stats.allReduceBytes, "f32: trace");
    // f32: the average of the local gradients.
    const mean = local[0].map((_, p) =>
      local[0][p].map((_, i) => Math.fround(local.reduce((s, g) => s + g[p][i], 0) / size))
    );
    run(0, "f32").grads.forEach((g, p) =>
      g.forEach((x, i) =>
        assert.ok(Math.abs(x - mean[p][i]) <= 1e-6 * Math.max(1, Math.abs(mean[p][i])))
      )
    );
    for (let r = 0; r < size; r++) {
      const params = run(r, "bf16Params");
      assert.equal(params.out, "bf16", "the forward ran on bf16 copies of the parameters");
      assert.deepEqual(params.gradDtypes, ["f32", "f32", "f32", "f32"]);
      // bf16 products: near the f32 gradients, not equal.
      params.grads.flat().forEach((x, i) => {
        const want = run(r, "f32").grads.flat()[i];
        assert.ok(Math.abs(x - want) <= 0.05 * Math.max(1, Math.abs(want)), `${x} vs ${want}`);
      });
      assert.equal(
        results[r].refused,
        'DistributedDataParallel: mixedPrecision.reduceDtype must be one of f32, bf16, f16, got "f64"',
      );
    }
  });
}
