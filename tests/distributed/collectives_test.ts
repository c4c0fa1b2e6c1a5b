// Collectives across 1 to 4 real rank processes, checked against values computed here.
import assert from "node:assert/strict";
import type { ReduceOp } from "../../src/distributed/backend.ts";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import {
  ALL_REDUCE_LENGTHS,
  input,
  key,
  LARGE_LENGTH,
  LARGE_OPS,
  OPS,
  PAST_INLINE_LENGTH,
  reduce,
  REDUCE_SCATTER_CHUNKS,
  SMALL_LENGTH,
} from "./workers/_data.ts";

const worker = new URL("./workers/collectives.ts", import.meta.url);
const dtypes = ["f32", "i32"] as const;

function assertClose(actual: number[], expected: number[], what: string, op?: ReduceOp) {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const ok = op === "avg"
      ? Math.abs(actual[i] - expected[i]) <= 1e-6 * Math.max(1, Math.abs(expected[i]))
      : actual[i] === expected[i];
    if (!ok) assert.fail(`${what}: element ${i} is ${actual[i]}, expected ${expected[i]}`);
  }
}

for (const size of [1, 2, 3, 4]) {
  Deno.test(`collectives across ${size} rank${size > 1 ? "s" : ""} match locally computed values`, async (t) => {
    const runs = await runRanks({ worker, worldSize: size, timeoutMs: 60_000 });
    assertAllOk(runs);
    const results = runs.map((r) => r.result!.results as Record<string, number[]>);
    const ranks = results.map((_, r) => r);

    await t.step("allReduce: every op, both dtypes, lengths 1, 7, 1001 (and 300001)", () => {
      for (const dtype of dtypes) {
        for (const [salt, op] of OPS[dtype].entries()) {
          const lengths = LARGE_OPS.includes(op)
            ? [...ALL_REDUCE_LENGTHS, LARGE_LENGTH]
            : ALL_REDUCE_LENGTHS;
          for (const n of lengths) {
            const want = reduce(ranks.map((r) => input(r, n, dtype, salt, op)), op, dtype);
            for (const r of ranks) {
              assertClose(
                results[r][key("allReduce", op, dtype, n)],
                want,
                `rank ${r} allReduce ${op} ${dtype} ×${n}`,
                op,
              );
            }
          }
        }
      }
    });

    await t.step("reduceScatter: every op, both dtypes, chunks of 1, 5, 33 per rank", () => {
      for (const dtype of dtypes) {
        for (const [salt, op] of OPS[dtype].entries()) {
          for (const chunk of REDUCE_SCATTER_CHUNKS) {
            const full = reduce(
              ranks.map((r) => input(r, size * chunk, dtype, salt, op)),
              op,
              dtype,
            );
            for (const r of ranks) {
              assertClose(
                results[r][key("reduceScatter", op, dtype, chunk)],
                full.slice(r * chunk, (r + 1) * chunk),
                `rank ${r} reduceScatter ${op} ${dtype} chunk ${chunk}`,
                op,
              );
            }
          }
        }
      }
    });

    await t.step("broadcast: from every root, both dtypes", () => {
      for (const dtype of dtypes) {
        for (let root = 0; root < size; root++) {
          const want = Array.from(input(root, SMALL_LENGTH, dtype, 100 + root));
          for (const r of ranks) {
            assertClose(
              results[r][key("broadcast", root, dtype)],
              want,
              `rank ${r} broadcast from ${root} ${dtype}`,
            );
          }
        }
      }
    });

    await t.step("allGather: into one flat tensor and into one tensor per rank", () => {
      for (const dtype of dtypes) {
        const want = ranks.flatMap((r) => Array.from(input(r, SMALL_LENGTH, dtype, 200)));
        for (const r of ranks) {
          assertClose(
            results[r][key("allGather", "flat", dtype)],
            want,
            `rank ${r} allGather flat ${dtype}`,
          );
          assertClose(
            results[r][key("allGather", "list", dtype)],
            want,
            `rank ${r} allGather list ${dtype}`,
          );
        }
      }
    });

    await t.step(
      `broadcast, allGather and reduceScatter past the inline limit (${PAST_INLINE_LENGTH} elements)`,
      () => {
        const big = PAST_INLINE_LENGTH;
        const bcast = Array.from(input(size - 1, big, "f32", 400));
        const gathered = ranks.flatMap((r) => Array.from(input(r, big, "f32", 500)));
        const reduced = reduce(ranks.map((r) => input(r, size * big, "i32", 600)), "sum", "i32");
        for (const r of ranks) {
          assertClose(results[r][key("large", "broadcast")], bcast, `rank ${r} large broadcast`);
          assertClose(results[r][key("large", "allGather")], gathered, `rank ${r} large allGather`);
          assertClose(
            results[r][key("large", "reduceScatter")],
            reduced.slice(r * big, (r + 1) * big),
            `rank ${r} large reduceScatter`,
          );
        }
      },
    );

    await t.step("eight all-reduces in flight at once complete in issue order", () => {
      for (let j = 0; j < 8; j++) {
        const want = reduce(ranks.map((r) => input(r, 1000 + j, "f32", j)), "sum", "f32");
        for (const r of ranks) {
          assertClose(results[r][key("inflight", j)], want, `rank ${r} in-flight #${j}`);
        }
      }
    });

    if (size >= 3) {
      await t.step(`newGroup([${size - 1}, 0]) reduces over its members only`, () => {
        const members = [0, size - 1];
        const want = reduce(members.map((r) => input(r, 9, "i32", 300)), "sum", "i32");
        for (const r of ranks) {
          const got = results[r][key("group", "allReduce")];
          if (members.includes(r)) assertClose(got, want, `rank ${r} group allReduce`);
          else assert.equal(got, undefined, `rank ${r} is not a member`);
        }
      });
    }
  });
}
