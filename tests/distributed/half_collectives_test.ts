// bf16 and f16 collectives across real rank processes, over shared memory, Gloo (DTRAIN_SHM=0) and
// the emu backend on 2 and 3 ranks, and shm+gloo on two fake hosts of two, checked against the hand
// computation of _half.ts: sums fold in rank order (shm+gloo: within each host, then across hosts)
// with every step rounded to the 2-byte type (NCCL's and PyTorch's Gloo rounding, [Note: half
// reductions] in csrc/gloo/reduce.cc), which the test tells apart from an f32 sum rounded once.
// Past Gloo's inline payload (HALF_LARGE) the order is Gloo's ring's, so those inputs are
// integers, exact in any order. Each row names its transport, so the suite's second pass over
// Gloo (scripts/test.sh) does not run this file again.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import type { ReduceOp } from "../../src/distributed/backend.ts";
import {
  type Half,
  HALF_CHUNKS,
  HALF_LARGE,
  HALF_LARGE_OPS,
  HALF_LENGTHS,
  HALF_OPS,
  HALF_SMALL,
  halfInput,
  halfReduce,
  roundedOnce,
  roundTo,
} from "./workers/_half.ts";

const worker = new URL("./workers/half_collectives.ts", import.meta.url);

function assertEqualValues(actual: number[], expected: number[], what: string): void {
  assert.equal(actual?.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    if (!Object.is(actual[i], expected[i])) {
      assert.fail(`${what}: element ${i} is ${actual[i]}, expected ${expected[i]}`);
    }
  }
}

/** Two fake hosts of two ranks each (DTRAIN_SHM_HOST): the shm+gloo backend. */
const HOSTS = [[0, 1], [2, 3]];

/**
 * shm+gloo's reduction: each host's ranks in rank order over shared memory, then the hosts' results
 * in host order between the leaders, each step rounded; "avg" divides the whole sum once.
 */
function hierarchicalReduce(inputs: number[][], op: ReduceOp, dtype: Half): number[] {
  const inner = op === "avg" ? "sum" : op;
  const perHost = HOSTS.map((ranks) => halfReduce(ranks.map((r) => inputs[r]), inner, dtype));
  const total = halfReduce(perHost, inner, dtype);
  return op === "avg" ? total.map((x) => roundTo(dtype, Math.fround(x) / inputs.length)) : total;
}

const TRANSPORTS = [
  {
    name: "shared memory",
    sizes: [2, 3],
    // "" keeps shared memory on even where the caller turned it off (DTRAIN_SHM=0).
    env: () => ({ DTRAIN_SHM: "" }),
    backend: "shm",
    reduce: halfReduce,
  },
  {
    name: "Gloo",
    sizes: [2, 3],
    env: () => ({ DTRAIN_SHM: "0" }),
    backend: "gloo",
    reduce: halfReduce,
  },
  {
    name: "emu",
    sizes: [2, 3],
    env: () => ({ DEVICE: "emu" }),
    backend: "emu",
    reduce: halfReduce,
  },
  {
    name: "shm+gloo (two hosts of two)",
    sizes: [4],
    // DTRAIN_SHM "" keeps shared memory on under the suite's DTRAIN_SHM=0 pass.
    env: (r: number) => ({ DTRAIN_SHM_HOST: `host-${r < 2 ? "a" : "b"}`, DTRAIN_SHM: "" }),
    backend: "shm+gloo",
    reduce: hierarchicalReduce,
  },
] as const;

for (const transport of TRANSPORTS) {
  for (const size of transport.sizes) {
    Deno.test(`bf16 and f16 collectives on ${size} ranks over ${transport.name} equal the sums rounded at every step, in their order`, async () => {
      const runs = await runRanks({
        worker,
        worldSize: size,
        timeoutMs: 90_000,
        env: (r) => transport.env(r),
      });
      assertAllOk(runs);
      const results = runs.map((r) => r.result!.results as Record<string, number[]>);
      // Under DTRAIN_SHM=0 (the suite's second pass) every host transport is Gloo.
      const backends = runs.map((r) => r.result!.backend);
      assert.deepEqual(backends, runs.map(() => transport.backend));
      const reduce = transport.reduce;
      const ranks = results.map((_, r) => r);
      let distinguished = 0;
      for (const dtype of ["bf16", "f16"] as const) {
        for (const [salt, op] of HALF_OPS.entries()) {
          for (const n of HALF_LENGTHS) {
            const inputs = ranks.map((r) => halfInput(r, n, salt));
            const want = reduce(inputs, op, dtype);
            if (op === "sum" && size > 2) {
              const once = roundedOnce(inputs, dtype);
              distinguished += want.filter((v, i) => v !== once[i]).length;
            }
            for (const r of ranks) {
              const what = `rank ${r} allReduce ${op} ${dtype} ×${n}`;
              assertEqualValues(results[r][`allReduce/${op}/${dtype}/${n}`], want, what);
            }
          }
          for (const chunk of HALF_CHUNKS) {
            const inputs = ranks.map((r) => halfInput(r, size * chunk, salt));
            const full = reduce(inputs, op, dtype);
            for (const r of ranks) {
              assertEqualValues(
                results[r][`reduceScatter/${op}/${dtype}/${chunk}`],
                full.slice(r * chunk, (r + 1) * chunk),
                `rank ${r} reduceScatter ${op} ${dtype} chunk ${chunk}`,
              );
            }
          }
          if (!HALF_LARGE_OPS.includes(op)) continue;
          for (const what of ["allReduce", "reduceScatter"]) {
            for (const r of ranks) {
              const at = results[r][`${what}/${op}/${dtype}/large`];
              assert.deepEqual(
                at,
                [-1],
                `rank ${r} ${what} ${op} ${dtype} ×${HALF_LARGE}: at ${at}`,
              );
            }
          }
        }
        for (let root = 0; root < size; root++) {
          for (const r of ranks) {
            assertEqualValues(
              results[r][`broadcast/${root}/${dtype}`],
              halfInput(root, HALF_SMALL, 100 + root),
              `rank ${r} broadcast from ${root} ${dtype}`,
            );
          }
        }
        const gathered = ranks.flatMap((r) => halfInput(r, HALF_SMALL, 200));
        for (const r of ranks) {
          for (const form of ["flat", "list", "blocking", "started"]) {
            // Only shared memory's and Gloo's groups start a gather on a thread of their own.
            const small = results[r][`allGather/${form}/${dtype}/${HALF_SMALL}`];
            if (form === "started" && small === undefined) continue;
            assertEqualValues(
              small,
              gathered,
              `rank ${r} allGather ${form} ${dtype} ×${HALF_SMALL}`,
            );
            const large = results[r][`allGather/${form}/${dtype}/${HALF_LARGE}`];
            assert.deepEqual(large, [-1], `rank ${r} allGather ${form} ${dtype} ×${HALF_LARGE}`);
          }
        }
      }
      // The inputs make rounding at every step differ from one rounding of the f32 sum.
      if (size > 2) assert.ok(distinguished > 100, `only ${distinguished} sums tell the two apart`);
    });
  }
}
