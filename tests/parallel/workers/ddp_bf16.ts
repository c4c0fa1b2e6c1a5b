/**
 * Worker for ddp_bf16_test.ts: one backward of a small MLP on this rank's rows, plainly (the local
 * gradients) and under DistributedDataParallel with `mixedPrecision` f32, `{ reduceDtype: "bf16" }`
 * and `{ paramDtype: "bf16" }`, each bucket one parameter. Reports the gradients, the outputs'
 * dtypes, lastStats' bytes and the trace's (of the bucket all-reduces), and what a policy DDP does
 * not have is refused with.
 * @module
 */

import { destroyProcessGroup, getRank, initProcessGroup } from "../../../src/distributed/mod.ts";
import { MLP } from "../../../src/nn/container.ts";
import { DistributedDataParallel } from "../../../src/parallel/mod.ts";
import type { MixedPrecisionPolicy } from "../../../src/parallel/mixed_precision.ts";
import { randn } from "../../../src/tensor/creation.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { startProfile, stopProfile } from "../../../src/profile/tracer.ts";
import { runWorker } from "../../_harness/worker.ts";

await runWorker(async () => {
  await initProcessGroup({ timeoutMs: 20_000 });
  const rank = getRank();
  const model = () => {
    manualSeed(11);
    return new MLP([6, 5, 3]);
  };
  const input = () => {
    manualSeed(100 + rank);
    return randn([4, 6]);
  };
  const grads = (m: MLP) =>
    m.parameters().map((p) => Array.from(p.grad!.toArray() as Float32Array));
  const local = model();
  local.forward(input()).pow(2).sum().backward();
  const runs: Record<string, unknown> = { local: grads(local) };
  for (
    const [name, policy] of Object.entries<MixedPrecisionPolicy | undefined>({
      f32: undefined,
      bf16Reduce: { reduceDtype: "bf16" },
      f16Reduce: { reduceDtype: "f16" },
      bf16Params: { paramDtype: "bf16" },
    })
  ) {
    const m = model();
    const ddp = await DistributedDataParallel.create(m, {
      mixedPrecision: policy,
      firstBucketMb: 1e-6,
      bucketCapMb: 1e-6,
    });
    const y = ddp.forward(input());
    startProfile(await Deno.makeTempFile({ suffix: ".json" }), rank);
    await ddp.backward(y.pow(2).sum().to("f32"));
    // Under the launcher's env the rank's file is <path>.rank<N>.json.
    const written = stopProfile()!;
    const events = JSON.parse(await Deno.readTextFile(written)).traceEvents as {
      name: string;
      args?: { bytes?: number };
    }[];
    await Deno.remove(written);
    const traceBytes = events.filter((e) => e.name.startsWith("allReduce bucket"))
      .reduce((sum, e) => sum + (e.args?.bytes ?? 0), 0);
    runs[name] = {
      grads: grads(m),
      out: y.dtype,
      gradDtypes: m.parameters().map((p) => p.grad!.dtype),
      stats: ddp.lastStats,
      traceBytes,
    };
  }
  let refused = "ok";
  try {
    await DistributedDataParallel.create(model(), {
      mixedPrecision: { reduceDtype: "f64" } as unknown as MixedPrecisionPolicy,
    });
  } catch (err) {
    refused = (err as Error).message;
  }
  await destroyProcessGroup();
  return { runs, refused };
});
