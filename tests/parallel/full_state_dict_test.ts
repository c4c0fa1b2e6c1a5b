// fullStateDict gathers every mesh dimension that shards a parameter, on real rank processes: the
// tiny GPT under TP 2 (2 ranks), TP 2 × FSDP 2 (4), HSDP 2 × 2 × TP 2 and PP 2 × FSDP 2 × TP 2
// (8; the pipeline's stages together) gives, on every rank, the whole tensors of one process's
// model: bit-equal right after parallelizing, and after 3 clipped AdamW steps within 1e-5 of one
// process trained on the same batches (the key bias and vanishing-gradient elements apart, as
// _tp_compare.ts says), the same on every rank, and equal to rank 0's consolidation of a sharded
// checkpoint; saveObject refuses a rank's own (sharded) state dict. Before, TP shards came back as if whole
// (c_attn.weight [48, 32] of [96, 32] under TP 2 × FSDP 2).
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv, withTempDir } from "../_harness/processes.ts";
import { load } from "../../src/safetensors/safetensors.ts";
import { destroyProcessGroup, initProcessGroup } from "../../src/distributed/mod.ts";
import { MLP } from "../../src/nn/container.ts";
import { fullStateDict, fullyShard } from "../../src/parallel/mod.ts";
import { relativeError } from "../_harness/close.ts";
import { apartVanishing, keyBiasApart } from "./_tp_compare.ts";
import { buildModel, trainParts } from "./workers/tp_problem.ts";
import type { Report, Whole } from "./workers/full_state_dict.ts";

const worker = new URL("./workers/full_state_dict.ts", import.meta.url);
const TOLERANCE = 1e-5, ROWS = 8;

/** One process's model, as built and after the same 3 steps on whole batches, and its gradients. */
async function reference() {
  const asWhole = (m: ReturnType<typeof buildModel>): Whole =>
    Object.fromEntries(
      Object.entries(m.stateDict()).map((
        [k, t],
      ) => [k, { shape: [...t.shape], values: [...t.toArray()] }]),
    );
  const model = buildModel();
  const initial = asWhole(model);
  const trace = await trainParts(model, 0, 1, (loss) => loss.backward(), ROWS);
  return { initial, final: asWhole(model), grads: trace.grads };
}

/** Runs the worker's `layout` on `worldSize` ranks and checks what they report. */
async function runAndCheck(layout: string, worldSize: number): Promise<void> {
  await withTempDir("full_state_dict", async (dir) => {
    const marker = crypto.randomUUID();
    const runs = await runRanks({
      worker,
      worldSize,
      timeoutMs: 240_000,
      env: () => ({ LAYOUT: layout, DIR: dir, ...markerEnv(marker) }),
    });
    const left = markedProcesses(marker);
    assert.deepEqual(left, [], `left behind: ${describe(left)}`);
    assertAllOk(runs);
    await check(runs.map((r) => (r.result as { reports: Report[] }).reports));
  });
}

/** Fails unless every rank's reports hold one process's whole model (see the file's comment). */
async function check(ranks: Report[][]): Promise<void> {
  const ref = await reference();
  const names = Object.keys(ref.initial);
  for (const [i, { label }] of ranks[0].entries()) {
    let worst = 0;
    for (const [rank, reports] of ranks.entries()) {
      const got = reports[i], what = `${label}, rank ${rank}`;
      const held = Object.keys(got.initial);
      if (!got.stage) assert.deepEqual(held.sort(), [...names].sort(), `${what}: names`);
      for (const name of held) {
        assert.ok(name in ref.initial, `${what}: ${name} is not in the whole model`);
        const { shape, values } = got.initial[name];
        assert.deepEqual(shape, ref.initial[name].shape, `${what}: ${name}'s shape`);
        assert.deepEqual(values, ref.initial[name].values, `${what}: ${name} as built`);
      }
      if (got.final === null) continue;
      assert.deepEqual(got.final, ranks[0][i].final, `${what}: not rank 0's whole state`);
      assert.match(
        got.saveObjectRefused ?? "saved",
        /cannot save: model\.\S+ is this rank's (tensor-parallel|FSDP) shard \(.*\), not a whole tensor; save parallel\.fullStateDict\(model\)/,
        `${what}: saveObject of its shards`,
      );
      if (got.consolidated) {
        const { tensors } = load(got.consolidated);
        const file = Object.fromEntries(
          Object.entries(tensors).map((
            [k, t],
          ) => [k, { shape: [...t.shape], values: [...t.toArray()] }]),
        );
        assert.deepEqual(file, got.final, `${what}: the consolidated checkpoint`);
      }
      for (const name of names) {
        let mine = got.final[name].values, want = ref.final[name].values;
        if (name.endsWith("attn.c_attn.bias")) {
          mine = keyBiasApart(mine, 0, mine.length, what);
          want = keyBiasApart(want, 0, want.length, "reference");
        } else {
          const grad0 = ref.grads[name] ?? ref.grads["transformer.wte.weight"]; // lm_head is tied
          [mine, want] = apartVanishing(mine, want, grad0, `${what}: ${name}`);
        }
        const err = relativeError(mine, want, `${what}: ${name}`);
        assert.ok(err <= TOLERANCE, `${what}: ${name} has relative error ${err}`);
        worst = Math.max(worst, err);
      }
    }
    // A pipeline's stages together hold the whole model.
    const held = new Set(ranks.flatMap((reports) => Object.keys(reports[i].initial)));
    assert.deepEqual([...held].sort(), [...names].sort(), `${label}: the ranks' names`);
    const after = ranks[0][i].final === null ? "" : `; worst relative error after 3 steps ${worst}`;
    console.log(`${label}: whole on every rank${after}`);
  }
}

Deno.test("fullStateDict on 2 ranks under TP 2 gives one process's whole tensors on every rank", async () => {
  await runAndCheck("tp", 2);
});

Deno.test("fullStateDict on 4 ranks under TP 2 × FSDP 2 gathers both dimensions: one process's whole tensors on every rank", async () => {
  await runAndCheck("tp_fsdp", 4);
});

Deno.test("fullStateDict on 8 ranks under HSDP 2 × 2 × TP 2, and on each stage of PP 2 × FSDP 2 × TP 2, gathers every dimension: one process's whole tensors", async () => {
  await runAndCheck("3d", 8);
});

Deno.test("fullStateDict refuses a submodule whose parameters a fullyShard root above it shards, naming the parameter, its FSDP rows and the fix", async () => {
  await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
  try {
    const model = fullyShard(new MLP([4, 3, 2]));
    await assert.rejects(
      () => fullStateDict(model[0]),
      /^Error: fullStateDict: weight is sharded by FSDP \(this rank holds rows 0\.\.2 of \[3,4\]\) under a fullyShard root outside this Linear, so its FSDP dimension cannot be gathered here; call fullStateDict on that root$/,
    );
  } finally {
    await destroyProcessGroup();
  }
});
