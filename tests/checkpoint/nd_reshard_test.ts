// N-D checkpoint resharding at the library level, on real rank processes: the tiny GPT and its
// AdamW state saved by tensor parallelism on 2 ranks load onto FSDP on 2 ranks and into one
// process, and saved by HSDP on a 2 × 2 mesh load onto tensor parallelism on 2 ranks; in each,
// the full tensors the loading ranks hold equal the saved ranks' full tensors exactly.
import assert from "node:assert/strict";
import { loadSharded } from "../../src/checkpoint/mod.ts";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { buildModel, buildOptimizer } from "../parallel/workers/tp_problem.ts";
import { assemble, type Holdings, holdings } from "./_nd_state.ts";

const worker = new URL("./nd_reshard_worker.ts", import.meta.url);

async function run(worldSize: number, env: Record<string, string>) {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize,
    timeoutMs: 60_000,
    env: { ...env, ...markerEnv(marker) },
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  return runs.map((r) => r.result! as Record<string, Holdings>);
}

/** The loaded full state equals the saved one exactly: every tensor, every AdamW number. */
function assertSame(
  loaded: ReturnType<typeof assemble>,
  saved: ReturnType<typeof assemble>,
  what: string,
): void {
  assert.deepEqual(Object.keys(loaded.full).sort(), Object.keys(saved.full).sort(), what);
  for (const [name, want] of Object.entries(saved.full)) {
    assert.deepEqual(loaded.full[name], want, `${what}: ${name}`);
  }
  assert.deepEqual(loaded.scalars, saved.scalars, `${what}: AdamW's step counts`);
}

Deno.test("N-D checkpoints reshard exactly: TP 2 → FSDP 2 and one process, HSDP 2 × 2 → TP 2 (parameters, AdamW moments and step counts)", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain_nd_reshard_" });
  try {
    const [tp, hsdp] = await Promise.all([
      run(2, { CASE: "saveTP", DIR: dir }),
      run(4, { CASE: "saveHSDP", DIR: dir }),
    ]);
    const savedTP = assemble(tp.map((r) => r.saved));
    const savedHSDP = assemble(hsdp.map((r) => r.saved));
    // The saves hold trained state, not the initial one that a failed load would leave.
    const fresh = buildModel();
    const initial = assemble([holdings(fresh, buildOptimizer(fresh.parameters()), 0, 1)]);
    for (const saved of [savedTP, savedHSDP]) {
      const name = "model/transformer.h.0.attn.c_attn.weight";
      assert.notDeepEqual(saved.full[name], initial.full[name], "the saved weights trained");
      assert.ok(saved.full["optim/transformer.h.0.attn.c_attn.weight/expAvgSq"], "AdamW state");
      assert.equal(saved.scalars["transformer.wte.weight"].step, 1);
    }
    // The layouts are what they say: TP shards q|k|v by heads, HSDP and FSDP cut rows.
    const qkv = (h: Holdings) => h.pieces["model/transformer.h.0.attn.c_attn.weight"].held;
    assert.deepEqual(qkv(tp[1].saved), {
      dim: 0,
      chunks: 3,
      fullShape: [96, 32],
      rowStart: 0,
      rows: 48,
    });
    assert.deepEqual([qkv(hsdp[3].saved).dim, qkv(hsdp[3].saved).rowStart], [null, 48]);
    const index = JSON.parse(Deno.readTextFileSync(`${dir}/tp/index.json`));
    assert.equal(index.format, "dtrain-sharded/2");

    const loads = await run(2, { CASE: "load", DIR: dir });
    assert.deepEqual(qkv(loads[1].fsdpFromTP).rowStart, 48, "FSDP 2 cuts rows");
    assert.deepEqual(qkv(loads[1].tpFromHSDP).dim, 0, "TP 2 shards q|k|v");
    assertSame(assemble(loads.map((r) => r.fsdpFromTP)), savedTP, "FSDP 2 from TP 2");
    assertSame(assemble(loads.map((r) => r.tpFromHSDP)), savedHSDP, "TP 2 from HSDP 2 × 2");
    const model = buildModel(), optimizer = buildOptimizer(model.parameters());
    loadSharded(`${dir}/tp`, { model, optimizer });
    assertSame(assemble([holdings(model, optimizer, 0, 1)]), savedTP, "one process from TP 2");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
