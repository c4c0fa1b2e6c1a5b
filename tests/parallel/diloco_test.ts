// DiLoCo on 2 real rank processes: every outer step equals the hand computation of
// [Note: DiLoCo's outer step] from the two ranks' pseudo-gradients (Nesterov's momentum written
// out, over 2 outer steps so that the momentum carries over), with the pseudo-gradient sent in
// f32, bf16 and int8; the residual error feedback carries is exactly what the rounding lost.
import assert from "node:assert/strict";
import { bf16Bits, bf16Value } from "../../src/tensor/dtype.ts";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";

const worker = new URL("./workers/diloco.ts", import.meta.url);
const WORLD = 2, H = 3, ROUNDS = 2;
/** The default outer optimizer's settings (the paper's). */
const OUTER_LR = 0.7, MOMENTUM = 0.9;
/** The MLP's parameter count, and its parameters (each an int8 scale). */
const NUMEL = 484, PARAMS = 6;

type Values = Record<string, number[]>;
interface Round {
  early: boolean[];
  local: Values;
  after: Values;
  original: Values;
  residual: Values;
  gradsLeft: number;
  bytes: number;
}
interface Run {
  observed: { initial: Values; rounds: Round[] };
  throughStep: { synced: boolean[]; final: Values };
}
type Dtype = "f32" | "bf16" | "int8";

/** Elementwise `f` over the parameters of `a` (and `b`), in f32 as the ranks compute. */
function map(a: Values, b: Values, f: (x: number, y: number) => number): Values {
  return Object.fromEntries(
    Object.entries(a).map(([name, xs]) => [name, xs.map((x, i) => Math.fround(f(x, b[name][i])))]),
  );
}

/** What a replica sends of `x` in `dtype`, as the receivers read it. */
function sent(x: Values, dtype: Dtype): Values {
  if (dtype === "f32") return x;
  if (dtype === "bf16") return map(x, x, (v) => bf16Value(bf16Bits(v)));
  // int8: per parameter, scale max|x|/127 (an f32), values rounded to the nearest step.
  return Object.fromEntries(
    Object.entries(x).map(([name, xs]) => {
      const scale = Math.fround(Math.max(...xs.map(Math.abs)) / 127);
      const q = xs.map((v) =>
        scale === 0 ? 0 : Math.max(-127, Math.min(127, Math.round(v / scale)))
      );
      return [name, q.map((n) => Math.fround(n * scale))];
    }),
  );
}

function maxAbs(v: Values): number {
  return Math.max(...Object.values(v).flat().map(Math.abs));
}

function assertClose(actual: Values, expected: Values, tolerance: number, what: string): void {
  assert.deepEqual(Object.keys(actual), Object.keys(expected), `${what}: parameter names`);
  for (const [name, want] of Object.entries(expected)) {
    want.forEach((w, i) => {
      const diff = Math.abs(actual[name][i] - w);
      assert.ok(diff <= tolerance, `${what}: ${name}[${i}] is ${actual[name][i]}, expected ${w}`);
    });
  }
}

Deno.test(`DiLoCo on ${WORLD} ranks: ${ROUNDS} outer steps of ${H} inner steps equal the hand-computed Nesterov outer step, in f32, bf16 and int8 with error feedback`, async (t) => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: WORLD,
    timeoutMs: 60_000,
    env: { H: String(H), ROUNDS: String(ROUNDS), ...markerEnv(marker) },
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  const results = runs.map((r) => r.result as { runs: Record<Dtype, Run>; refusals: string[] });

  for (const dtype of ["f32", "bf16", "int8"] as const) {
    await t.step(`${dtype}: every outer step is the hand computation`, () => {
      const ranks = results.map((r) => r.runs[dtype].observed);
      assert.deepEqual(ranks[1].initial, ranks[0].initial, "create gives every rank rank 0's θ");
      let theta = ranks[0].initial;
      let residuals: Values[] = ranks.map(() => map(theta, theta, () => 0));
      let buffer: Values | null = null;
      for (let round = 0; round < ROUNDS; round++) {
        const rounds = ranks.map((r) => r.rounds[round]);
        const what = `${dtype}, outer step ${round + 1}`;
        rounds.forEach((r, rank) =>
          assert.deepEqual(r.early, Array(H - 1).fill(false), `${what}, rank ${rank}`)
        );
        assert.notDeepEqual(
          rounds[0].local,
          rounds[1].local,
          `${what}: the replicas trained alone`,
        );
        // Δᵢ = θ − θᵢ, plus the residual of the last outer step when the wire rounds.
        const xs = rounds.map((r, rank) => {
          const delta = map(theta, r.local, (a, b) => a - b);
          return dtype === "f32" ? delta : map(delta, residuals[rank], (d, e) => d + e);
        });
        const sents = xs.map((x) => sent(x, dtype));
        if (dtype !== "f32") {
          residuals = xs.map((x, rank) => map(x, sents[rank], (v, s) => v - s));
          rounds.forEach((r, rank) => {
            assert.deepEqual(r.residual, residuals[rank], `${what}: rank ${rank}'s residual`);
            assert.ok(maxAbs(r.residual) > 0, `${what}: rank ${rank} lost nothing to ${dtype}?`);
          });
        } else rounds.forEach((r) => assert.deepEqual(r.residual, {}, `${what}: no residual`));
        const mean = map(sents[0], sents[1], (a, b) => (a + b) / 2);
        // SGD with Nesterov momentum: b ← μb + Δ (b = Δ at first), θ ← θ − lr·(Δ + μb).
        const b: Values = buffer === null ? mean : map(buffer, mean, (v, d) => MOMENTUM * v + d);
        const expected = map(
          theta,
          map(mean, b, (d, v) => d + MOMENTUM * v),
          (p, g) => p - OUTER_LR * g,
        );
        // bf16's average rounds on the wire, which the momentum carries into the next step.
        const tolerance = 2e-6 +
          (dtype === "bf16" ? OUTER_LR * 3 * 2 ** -7 * Math.max(...sents.map(maxAbs)) : 0);
        rounds.forEach((r, rank) => {
          assertClose(r.after, expected, tolerance, `${what}, rank ${rank}`);
          assert.deepEqual(r.after, rounds[0].after, `${what}: rank ${rank} equals rank 0`);
          assert.deepEqual(r.original, r.after, `${what}: rank ${rank}'s new θ is its weights`);
          assert.equal(r.gradsLeft, 0, `${what}: rank ${rank} kept gradients`);
        });
        theta = rounds[0].after;
        buffer = b;
      }
    });

    await t.step(`${dtype}: the wire carries ${dtype}`, () => {
      const bytes = { f32: NUMEL * 4, bf16: NUMEL * 2, int8: (PARAMS + NUMEL / 4) * 4 }[dtype];
      for (const r of results) {
        assert.deepEqual(r.runs[dtype].observed.rounds.map((round) => round.bytes), [bytes, bytes]);
      }
    });

    await t.step(`${dtype}: step() alone syncs every ${H} steps, to the same bits`, () => {
      results.forEach((r, rank) => {
        const { synced, final } = r.runs[dtype].throughStep;
        assert.deepEqual(synced, Array(ROUNDS).fill([false, false, true]).flat(), `rank ${rank}`);
        assert.deepEqual(final, r.runs[dtype].observed.rounds[ROUNDS - 1].after, `rank ${rank}`);
      });
    });
  }

  await t.step(
    "create refuses a bad period, error feedback in f32 and a partial outer optimizer",
    () => {
      for (const r of results) {
        assert.deepEqual(r.refusals, [
          "RangeError: DiLoCo: syncEvery must be an integer of at least 1, got 0",
          'RangeError: DiLoCo: errorFeedback needs a pseudoGradientDtype of "bf16" or "int8" ' +
          "(f32 loses nothing)",
          "Error: DiLoCo: the outer optimizer does not update 0.weight; build it over " +
          "model.parameters(), or those would return to their values at the last outer step every " +
          "time",
        ]);
      }
    },
  );
});
