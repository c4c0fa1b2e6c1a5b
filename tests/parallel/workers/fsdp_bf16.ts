/**
 * Worker for fsdp_bf16_test.ts: the GPT of gen_fsdp.py (its initial weights and global batches),
 * each block and then the root under fullyShard with `mpPolicy: { paramDtype: POLICY }` (POLICY
 * "bf16" or "f32"; DEVICE=emu puts each rank on its emulated device), trained with AdamW in nanoGPT's groups without clipping, as gen_fsdp_bf16.py
 * trains PyTorch's fully_shard. Records its timeline (src/profile) and reports each step's loss
 * and lastStats, the comm events' bytes of the trace per name, this rank's rows of every gradient
 * after the first backward, and fullStateDict.
 * @module
 */

import { dist, parallel, tidyAsync } from "../../../mod.ts";
import { startProfile, stopProfile } from "../../../src/profile/tracer.ts";
import type { PrecisionDtype } from "../../../src/parallel/mixed_precision.ts";
import { runWorker } from "../../_harness/worker.ts";
import { initialModel, loadReference, referenceAdamW, rows } from "./fsdp_torch.ts";

const paramDtype = (Deno.env.get("POLICY") ?? "bf16") as PrecisionDtype;
/** DEVICE=emu: each rank on `emu:<rank>` over the emu backend, instead of cpu over Gloo. */
const onEmu = Deno.env.get("DEVICE") === "emu";

await runWorker(async () => {
  await dist.initProcessGroup({ backend: onEmu ? "emu" : "gloo", timeoutMs: 20_000 });
  const trace = await Deno.makeTempFile({ suffix: ".json" });
  try {
    const ref = loadReference();
    const rank = dist.getRank(), size = dist.getWorldSize();
    const [steps, batch] = ref.idx.shape;
    const perRank = batch / size;
    const device = onEmu ? `emu:${rank}` : "cpu";
    const model = initialModel(ref).to(device);
    const mpPolicy = { paramDtype };
    for (const block of model.transformer.h.children()) parallel.fullyShard(block, { mpPolicy });
    const sharded = parallel.fullyShard(model, { mpPolicy });
    const params = sharded.parameters();
    const optimizer = referenceAdamW(params, ref);
    const losses: number[] = [], stats: parallel.FSDPStats[] = [];
    /** This rank's rows of every gradient after the first backward, by name. */
    const grads0: Record<string, number[]> = {};
    const dtypes = new Set<string>();
    startProfile(trace, rank);
    for (let step = 0; step < steps; step++) {
      await tidyAsync(async () => {
        const idx = rows(ref.idx, step, rank, perRank).to(device);
        const targets = rows(ref.targets, step, rank, perRank).to(device);
        const { loss } = sharded.forward(idx, targets);
        dtypes.add(loss.dtype);
        losses.push(loss.to("f32").item());
        await sharded.backward(loss);
        stats.push(sharded.lastStats);
        if (step === 0) {
          for (const [name, p] of sharded.namedParameters()) {
            grads0[name] = Array.from(p.grad!.toArray() as Float32Array);
          }
        }
        for (const p of params) dtypes.add(`${p.dtype}/${p.grad?.dtype}`);
        optimizer.step();
        optimizer.zeroGrad();
      });
    }
    // Under the launcher's env (RANK set) the rank's file is trace.rank<N>.json.
    const written = stopProfile()!;
    const events = JSON.parse(await Deno.readTextFile(written)).traceEvents as {
      name: string;
      cat: string;
      args?: { bytes?: number };
    }[];
    await Deno.remove(written);
    const traceBytes: Record<string, number> = {};
    for (const e of events.filter((e) => e.cat === "comm")) {
      traceBytes[e.name] = (traceBytes[e.name] ?? 0) + (e.args?.bytes ?? 0);
    }
    const state = await parallel.fullStateDict(sharded);
    const final = Object.fromEntries(
      Object.entries(state).map(([name, t]) => [name, Array.from(t.toArray() as Float32Array)]),
    );
    for (const t of Object.values(state)) t.dispose();
    return { losses, stats, traceBytes, final, grads0, dtypes: [...dtypes] };
  } finally {
    await Deno.remove(trace).catch(() => {});
    await dist.destroyProcessGroup();
  }
});
