// A collective in flight owns its tensors (see [Note: collectives own their tensors] in
// src/tensor/storage.ts): with real ranks on Gloo and on shared memory, every use of an owned
// tensor throws an error naming the collective, its op number, the line that issued it and how
// to wait for it, and the same uses give the right values once it was awaited.
import assert from "node:assert/strict";
import {
  allReduce,
  destroyProcessGroup,
  DistError,
  initProcessGroup,
} from "../../src/distributed/mod.ts";
import { setLedgerSize } from "../../src/distributed/ledger.ts";
import { full } from "../../src/tensor/creation.ts";
import { allocatedBytes } from "../../src/tensor/storage.ts";
import { assertAllOk, freePort, runRanks } from "../_harness/ranks.ts";

const worker = new URL("./workers/ownership.ts", import.meta.url);
const source = Deno.readTextFileSync(worker).split("\n");

/** The worker's line that carries `// issued: NAME`, as `file:line`. */
function issuedAt(name: string): string {
  const at = source.findIndex((line) => line.endsWith(`// issued: ${name}`));
  assert.ok(at >= 0, `the worker marks the line issuing ${name}`);
  return `workers/ownership.ts:${at + 1}`;
}

/** Checks that `message` refuses the use for `op`, op number `seq` in `group`, issued at `line`. */
function assertRefused(
  message: string,
  what: { op: string; seq: number; group: string; line: string; wait: string },
) {
  const named = `${what.op} (op #${what.seq} of group "${what.group}", issued at `;
  assert.ok(message.includes(named), `names ${what.op} #${what.seq}: ${message}`);
  const site = message.slice(message.indexOf(named) + named.length).split(")")[0];
  assert.ok(site.endsWith(what.line), `names the line ${what.line}, got ${site}: ${message}`);
  assert.ok(message.includes(`still in flight on this tensor`), message);
  assert.ok(message.includes(what.wait), `says how to wait (${what.wait}): ${message}`);
}

const AWAIT = "await it, or call .wait()";

for (const [backend, shm] of [["Gloo", "0"], ["shared memory", "1"]] as const) {
  Deno.test(`on ${backend}, using a tensor a collective owns throws naming it, and awaiting it releases the tensor`, async () => {
    const runs = await runRanks({
      worker,
      worldSize: 2,
      timeoutMs: 60_000,
      env: { DTRAIN_SHM: shm },
    });
    assertAllOk(runs);
    for (const run of runs) {
      const { refused, values, seqs, backend: used } = run.result as unknown as {
        refused: Record<string, string>;
        values: Record<string, number[]>;
        seqs: Record<string, number>;
        backend: string;
      };
      const rank = run.rank;
      assert.equal(used, shm === "1" ? "shm" : "gloo", `rank ${rank}'s backend`);
      const allReduce = {
        op: "allReduce",
        seq: seqs.allReduce,
        group: "world",
        line: issuedAt("allReduce"),
        wait: AWAIT,
      };
      for (const use of ["toArray", "item", "input", "inPlace", "print"]) {
        assertRefused(refused[use], allReduce);
      }
      // 1 + 2 on every rank, the in-place doubling refused (PyTorch users read 1 or 2 here).
      assert.deepEqual(values.awaited, [3, 3, 3, 3], `rank ${rank}`);
      assert.deepEqual(values.sum, [31, 31, 31], `rank ${rank}`);
      assert.deepEqual(values.twice, [6, 6], `rank ${rank}: (1 + 2) reduced twice`);
      assertRefused(refused.step, {
        ...allReduce,
        seq: seqs.gradient,
        line: issuedAt("gradient"),
      });
      // p = 1 - 0.5 × (1 + 2) once the gradient's sum arrived.
      assert.deepEqual(values.stepped, [-0.5, -0.5], `rank ${rank}`);
      const op = rank === 0 ? "isend" : "irecv";
      assertRefused(refused[op], {
        op,
        seq: seqs[op],
        group: "world 0-1",
        line: issuedAt(op),
        wait: AWAIT,
      });
      assert.deepEqual(values.message, [7, 7, 7, 7, 7], `rank ${rank}: the message`);
      if (values.gathered !== undefined) {
        assertRefused(refused.started, {
          op: "allGatherStart",
          seq: seqs.started,
          group: "world",
          line: issuedAt("allGatherStart"),
          wait: ".waitBlocking()",
        });
        assert.deepEqual(values.gathered, [0, 0, 1, 1], `rank ${rank}`);
      }
    }
    // Gloo starts all-gathers on a native thread: its case must have run.
    if (shm === "0") {
      assert.ok(
        runs.every((r) => (r.result!.values as { gathered?: number[] }).gathered),
        "gathered",
      );
    }
  });
}

Deno.test("in one process, an owned tensor may be disposed, and with the ledger off the error still names the collective and how to wait", async () => {
  await initProcessGroup({
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 5000,
  });
  try {
    // Disposing is no use of the bytes: the collective keeps them until it settles.
    const before = allocatedBytes();
    const gone = full([256], 1);
    const sending = allReduce(gone);
    gone.dispose();
    assert.notEqual(gone.storage.ptr, null, "the collective holds the memory");
    await sending;
    assert.equal(allocatedBytes(), before, "freed once settled");

    setLedgerSize(0);
    const t = full([2], 5);
    const work = allReduce(t);
    assert.throws(() => t.toArray(), (err: unknown) => {
      const message = (err as Error).message;
      assert.ok(err instanceof DistError && err.code === "invalid", message);
      assert.ok(message.startsWith("a collective (op number and call site unknown"), message);
      assert.ok(message.includes(AWAIT), message);
      return true;
    });
    await work.wait();
    assert.deepEqual(Array.from(t.toArray()), [5, 5]);
  } finally {
    setLedgerSize(2000);
    await destroyProcessGroup();
  }
});
