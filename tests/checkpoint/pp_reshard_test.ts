// Sharded checkpoints of 3-D training reshard on load across all three dimensions, at the library
// level on real rank processes: the tiny GPT and its AdamW state saved by PP 2 × FSDP 2 × TP 2
// (each rank its stage, under the whole model's names) load into one process (PP 1) and onto
// PP 4 × FSDP 2 (stages of other layers, no TP, other FSDP rows); the full state the loading
// ranks hold equals the saved ranks' exactly.
import assert from "node:assert/strict";
import { loadSharded } from "../../src/checkpoint/mod.ts";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { buildModel, buildOptimizer } from "../parallel/workers/tp_problem.ts";
import { assemble, type Holdings, holdings } from "./_nd_state.ts";

const worker = new URL("./pp_reshard_worker.ts", import.meta.url);

async function run(env: Record<string, string>) {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: 8,
    timeoutMs: 120_000,
    env: { ...env, ...markerEnv(marker) },
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  return runs.map((r) => r.result! as Record<string, Holdings>);
}

/**
 * `assemble` over a pipeline's ranks, whose AdamW numbers are of different parameters: merged by
 * name, ranks holding the same parameter agreeing.
 */
function assembleStages(ranks: Holdings[]): ReturnType<typeof assemble> {
  const scalars: Holdings["scalars"] = {};
  for (const r of ranks) {
    for (const [fqn, v] of Object.entries(r.scalars)) {
      if (fqn in scalars) assert.deepEqual(v, scalars[fqn], `AdamW's numbers of ${fqn}`);
      scalars[fqn] = v;
    }
  }
  return { full: assemble(ranks.map((r) => ({ ...r, scalars: {} }))).full, scalars };
}

/** `loaded`'s full tensors and AdamW step counts equal `saved`'s exactly, name for name. */
function assertSame(
  loaded: ReturnType<typeof assemble>,
  saved: ReturnType<typeof assemble>,
  what: string,
): void {
  for (const [name, got] of Object.entries(loaded.full)) {
    assert.ok(name in saved.full, `${what}: ${name} was not saved`);
    assert.deepEqual(got, saved.full[name], `${what}: ${name}`);
  }
  // Every parameter the loading ranks hold has its saved step count back.
  for (const [fqn, want] of Object.entries(saved.scalars)) {
    if (!(`model/${fqn}` in loaded.full)) continue;
    assert.deepEqual(loaded.scalars[fqn], want, `${what}: AdamW's numbers of ${fqn}`);
  }
}

Deno.test("3-D checkpoints reshard exactly: PP 2 × FSDP 2 × TP 2 → one process and PP 4 × FSDP 2 (parameters, AdamW moments and step counts)", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain_pp_reshard_" });
  try {
    const saves = await run({ CASE: "save", DIR: dir });
    const saved = assembleStages(saves.map((r) => r.saved));
    // Every stage's state is in, under the whole model's names: the tied embedding under both
    // (the first stage's wte, the last's lm_head), equal to the bit.
    const whole = buildModel();
    const initial = assemble([holdings(whole, buildOptimizer(whole.parameters()), 0, 1)]);
    const wte = "transformer.wte.weight";
    for (const name of Object.keys(initial.full)) assert.ok(name in saved.full, name);
    for (const field of ["", "/expAvg", "/expAvgSq"]) {
      const [a, b] = field === ""
        ? [`model/${wte}`, "model/lm_head.weight"]
        : [`optim/${wte}${field}`, `optim/lm_head.weight${field}`];
      assert.deepEqual(saved.full[b], saved.full[a], `the tied copies ${a} and ${b}`);
    }
    const qkv = "model/transformer.h.1.attn.c_attn.weight";
    assert.notDeepEqual(saved.full[qkv], initial.full[qkv], "the saved weights trained");
    assert.equal(saved.scalars["transformer.h.1.attn.c_attn.weight"].step, 1, "the last stage's");
    assert.equal(saved.scalars[wte].step, 1);

    // PP 1: one process, the whole model.
    const model = buildModel(), optimizer = buildOptimizer(model.parameters());
    loadSharded(dir, { model, optimizer });
    const one = assemble([holdings(model, optimizer, 0, 1)]);
    // One process holds the tied embedding once, under wte's name.
    const once = Object.keys(saved.full).filter((n) => !n.includes("lm_head.weight"));
    assert.deepEqual(Object.keys(one.full).sort(), once.sort());
    assertSame(one, saved, "PP 1 from PP 2 × FSDP 2 × TP 2");

    // PP 4 × FSDP 2: stage 0 holds the embeddings alone, stage 3 the head alone.
    const loads = await run({ CASE: "load", DIR: dir });
    const four = assembleStages(loads.map((r) => r.loaded));
    assert.deepEqual(Object.keys(four.full).sort(), Object.keys(saved.full).sort());
    assertSame(four, saved, "PP 4 × FSDP 2 from PP 2 × FSDP 2 × TP 2");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
