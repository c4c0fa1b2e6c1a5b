// HSDP (fullyShard on a 2 × 2 device mesh: replicate × shard) across 4 real rank processes,
// checked against one process training on the whole global batch: losses, gradients (each rank's
// shard rows, equal on both replicas), clipped norms and weights after 3 AdamW steps, without and
// with activation checkpointing; mixed precision; and sharded checkpoints resharded between HSDP 2 × 2, FSDP 4, FSDP 2 and one process.
import assert from "node:assert/strict";
import { saveSharded } from "../../src/checkpoint/sharded_save.ts";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { stateValues } from "./workers/fsdp_problem.ts";
import {
  CLIP,
  freshModel,
  type GradRows,
  resumeInOneProcess,
  STEPS,
  type Trace,
  trainSteps,
} from "./workers/hsdp_problem.ts";
import { relativeError } from "../_harness/close.ts";
import type { AC } from "./workers/hsdp.ts";

const worker = new URL("./workers/hsdp.ts", import.meta.url);

type Params = Record<string, number[]>;
const TOLERANCE = 1e-5;
/**
 * The reference's backward passes per step: one process takes the whole global batch as the 4
 * ranks' quarters, each loss scaled by 1/4, which is the whole batch's mean-loss gradient. In one
 * backward over the whole batch the sums run in another order, and the first AdamW step (about
 * lr × sign(g)) turns their last-bit differences in small elements into a drift: one process
 * alone, whole-batch against quarter passes, ends 1.1e-5 apart in h.0's MLP weights after 3
 * steps (and 2e-5 in step 1's gradients), over TOLERANCE whatever the parallelism; against the
 * quarter passes HSDP stays well within it.
 */
const MICRO = 4;

/** Activation checkpointing before fullyShard (torchtitan's order) and after. */
const AC_CASES: AC[] = [
  { label: "full AC before fullyShard", mode: "full", afterShard: false },
  { label: "selective AC (every 2nd block) after fullyShard", mode: "selective", afterShard: true },
];

/** The relative error ‖got − want‖ / ‖want‖ (fsdp_test.ts's per-tensor measure). */
/** Every tensor within `tolerance` of the expected one (fsdp_test.ts's assertClose). */
function assertClose(actual: Params, expected: Params, tolerance: number, what: string): void {
  assert.deepEqual(Object.keys(actual), Object.keys(expected), `${what}: names`);
  for (const [name, want] of Object.entries(expected)) {
    const err = relativeError(actual[name], want, `${what}: ${name}: length`, 1e-12);
    assert.ok(err <= tolerance, `${what}: ${name} has relative error ${err}`);
  }
}

/**
 * The whole gradients that the shard ranks' rows make up (`whole` gives the names and shapes),
 * checked to cover every row once.
 */
function assembleGrads(
  shards: Record<string, GradRows>[],
  whole: Record<string, GradRows>,
  what: string,
): Params {
  const out: Params = {};
  for (const [name, { rows, values }] of Object.entries(whole)) {
    const full = new Array<number>(values.length).fill(NaN), rowNumel = values.length / rows;
    let covered = 0;
    for (const shard of shards) {
      const { rowStart, rows: n, values: mine } = shard[name];
      mine.forEach((v, i) => (full[rowStart * rowNumel + i] = v));
      covered += n;
    }
    assert.equal(covered, rows, `${what}: ${name}'s rows held once`);
    out[name] = full;
  }
  return out;
}

/** What one rank's HSDP run reports. */
interface Run {
  trace: Trace;
  final: Params;
  wrapped?: string[];
}

/**
 * Checks the 4 ranks' runs against the one-process reference: mean losses, each replica's
 * assembled gradients of every step, clipped norms and final weights within TOLERANCE; and the
 * replicas' gradients bit-equal. Returns the worst relative error of gradients and weights.
 */
function checkTraining(reference: Trace, referenceFinal: Params, runs: Run[], label: string) {
  let worst = 0;
  const close = (actual: Params, expected: Params, what: string) => {
    assertClose(actual, expected, TOLERANCE, what);
    for (const [name, want] of Object.entries(expected)) {
      worst = Math.max(worst, relativeError(actual[name], want, name, 1e-12));
    }
  };
  for (let step = 0; step < STEPS; step++) {
    const mean = runs.reduce((s, r) => s + r.trace.losses[step], 0) / 4;
    const want = reference.losses[step];
    assert.ok(Math.abs(mean - want) <= TOLERANCE * want, `${label}, step ${step}: loss ${mean}`);
    const whole = reference.grads[step];
    const wantGrads = Object.fromEntries(Object.entries(whole).map(([k, g]) => [k, g.values]));
    // Each replica's two shard ranks (0, 1 and 2, 3) hold the whole gradients between them.
    for (const replica of [0, 1]) {
      const shards = [runs[2 * replica].trace.grads[step], runs[2 * replica + 1].trace.grads[step]];
      const what = `${label}, replica ${replica}, step ${step} gradients`;
      close(assembleGrads(shards, whole, what), wantGrads, what);
    }
  }
  for (const [rank, r] of runs.entries()) {
    const what = `${label}, rank ${rank}`;
    for (let step = 0; step < STEPS; step++) {
      const want = reference.norms[step], norm = r.trace.norms[step];
      assert.ok(Math.abs(norm - want) <= TOLERANCE * want, `${what}: norm ${norm} ≠ ${want}`);
      assert.ok(want > CLIP, `norm ${want} does not exceed ${CLIP}: clipping never acted`);
    }
    close(r.final, referenceFinal, `${what}: weights`);
  }
  // Replicas (ranks r and r + 2) hold the same shards and got bit-equal gradients.
  for (const rank of [0, 1]) {
    const a = runs[rank].trace.grads, b = runs[rank + 2].trace.grads;
    assert.deepEqual(a, b, `${label}, ranks ${rank} and ${rank + 2}: replica gradients`);
  }
  return worst;
}

Deno.test("HSDP on a 2 × 2 mesh trains a GPT like one process on the whole batch (3 clipped AdamW steps; without and with full and selective activation checkpointing, before and after fullyShard; bf16 and f16 policies), its sharded checkpoints reshard to and from FSDP 4, FSDP 2 and one process, and bad options are refused", async (t) => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-hsdp-" });
  try {
    // One process on the whole batch: the reference, and the checkpoint HSDP resumes from.
    const { model, optimizer } = freshModel();
    // The whole batch in 4 backward passes over its quarters, the ranks' parts (see MICRO).
    const reference: Trace = await trainSteps(model, optimizer, 0, STEPS, 0, 1, (loss) => {
      loss.backward();
    }, MICRO);
    const referenceFinal = stateValues(model.stateDict());
    await saveSharded(`${dir}/single`, { model, optimizer });

    const marker = crypto.randomUUID();
    const runs = await runRanks({
      worker,
      worldSize: 4,
      timeoutMs: 90_000,
      env: () => ({ DIR: dir, AC_CASES: JSON.stringify(AC_CASES), ...markerEnv(marker) }),
    });
    const left = markedProcesses(marker);
    assert.deepEqual(left, [], `left behind: ${describe(left)}`);
    assertAllOk(runs);
    const results = runs.map((r) => r.result!);

    await t.step("losses, gradients, norms and weights equal one process's", () => {
      for (const [rank, r] of results.entries()) {
        const what = `rank ${rank}`;
        assert.deepEqual(r.coordinate, [rank >> 1, rank & 1], `${what}: mesh coordinate`);
        assert.equal(r.worldSize, 4, `${what}: the data-parallel size`);
      }
      const worst = checkTraining(reference, referenceFinal, results as unknown as Run[], "HSDP");
      console.log(`HSDP 2 × 2: worst relative error ${worst.toExponential(1)}`);
    });

    await t.step("with activation checkpointing, before or after fullyShard, the same", () => {
      for (const [i, ac] of AC_CASES.entries()) {
        const got = results.map((r) => (r.checkpointed as Run[])[i]);
        const wrapped = ac.mode === "full" ? ["transformer.h.0", "transformer.h.1"] : [
          "transformer.h.1",
        ];
        got.forEach((g, rank) => assert.deepEqual(g.wrapped, wrapped, `rank ${rank}: ${ac.label}`));
        const worst = checkTraining(reference, referenceFinal, got, ac.label);
        console.log(`HSDP 2 × 2, ${ac.label}: worst relative error ${worst.toExponential(1)}`);
      }
    });

    await t.step(
      "lastStats counts the replicate all-reduces; mixed precision reduces in its dtype",
      () => {
        type Stats = Record<string, number>;
        for (const [rank, r] of results.entries()) {
          const f32 = r.stats as Stats;
          const bf16 = (r.bf16 as { stats: Stats }).stats, f16 = (r.f16 as { stats: Stats }).stats;
          const what = `rank ${rank}`;
          // Three groups (two blocks and the root), each: one reduce-scatter of 2 × its shard
          // within dp_shard, then one all-reduce of its shard across dp_replicate.
          assert.equal(f32.reduceScatters, 3, `${what}: reduce-scatters`);
          assert.equal(f32.allReduces, 3, `${what}: all-reduces`);
          assert.ok(f32.allReduceBytes > 0, `${what}: all-reduce bytes`);
          assert.equal(f32.reduceScatterBytes, 2 * f32.allReduceBytes, `${what}: bytes of both`);
          for (const half of [bf16, f16]) {
            assert.equal(half.allReduces, 3, `${what}: half all-reduces`);
            assert.equal(half.allReduceBytes * 2, f32.allReduceBytes, `${what}: half the bytes`);
            assert.equal(half.reduceScatterBytes * 2, f32.reduceScatterBytes, `${what}: scatter`);
          }
          // Half-precision compute and reduction stay near the f32 gradients (a wrong divide
          // factor across the two collectives would be off by 2×).
          const grads = (r.trace as Trace).grads[0];
          for (const [policy, tolerance] of [["bf16", 0.1], ["f16", 0.05]] as const) {
            const rows = (r[policy] as { grads: Record<string, GradRows> }).grads;
            for (const [name, { values }] of Object.entries(rows)) {
              const err = relativeError(
                values,
                grads[name].values,
                `${what} ${policy} ${name}: length`,
                1e-12,
              );
              assert.ok(err <= tolerance, `${what}: ${policy} gradient of ${name} is ${err} off`);
            }
          }
        }
      },
    );

    await t.step("an HSDP checkpoint has each shard once: replica 0's files hold every row", () => {
      const index = JSON.parse(Deno.readTextFileSync(`${dir}/hsdp/index.json`));
      assert.equal(index.worldSize, 4);
      const files = new Set<number>();
      for (const { pieces } of Object.values(index.tensors) as { pieces: { file: number }[] }[]) {
        for (const piece of pieces) files.add(piece.file);
      }
      assert.deepEqual([...files].sort(), [0, 1], "only ranks 0 and 1 (replica 0) hold pieces");
    });

    await t.step("checkpoints reshard: HSDP → FSDP 4, FSDP 2, one process; and back", async () => {
      // Each resumed run loaded the 3-step weights and took step 4 as one process does from the
      // same checkpoint.
      const expected: Record<string, Awaited<ReturnType<typeof resumeInOneProcess>>> = {};
      for (const name of ["hsdp", "fsdp4", "fsdp2", "single"]) {
        expected[name] = await resumeInOneProcess(`${dir}/${name}`);
      }
      assertClose(expected.hsdp.loaded, referenceFinal, TOLERANCE, "one process loads HSDP's");
      const cases = [
        ["fsdp4", "hsdp"],
        ["fsdp2", "hsdp"],
        ["fromFsdp4", "fsdp4"],
        ["fromFsdp2", "fsdp2"],
        ["fromSingle", "single"],
      ] as const;
      for (const [rank, r] of results.entries()) {
        for (const [run, from] of cases) {
          const got = r[run] as { loaded: Params; final: Params };
          const what = `rank ${rank}: ${run} from ${from}`;
          assertClose(got.loaded, expected[from].loaded, 0, `${what}, loaded`);
          assertClose(got.final, expected[from].final, TOLERANCE, `${what}, step ${STEPS + 1}`);
        }
      }
    });

    await t.step("bad options are refused by name", () => {
      for (const r of results) {
        const errors = r.errors as Record<string, string>;
        assert.match(errors.both, /fullyShard: both group and mesh are given; give one/);
        assert.match(errors.threeD, /mesh DeviceMesh\('cpu', .*\) has 3 dimensions; .* slice it/);
        assert.match(errors.notMesh, /mesh must be a DeviceMesh \(from dist\.initDeviceMesh\)/);
        assert.match(errors.device, /parameters are on emu:0, but the mesh is a "cpu" one/);
      }
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
