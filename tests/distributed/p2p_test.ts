// Point-to-point messages across real rank processes, over the transport the suite runs with
// (shared memory, then Gloo under DTRAIN_SHM=0) and the emu backend: exchanges that check every
// byte, mismatches that name both ranks and both tags on both sides, a killed peer named at once,
// a receive with no send timing out naming the peer.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import {
  batchIsendIrecv,
  destroyProcessGroup,
  initProcessGroup,
  irecv,
  isend,
  P2POp,
  send,
} from "../../src/distributed/mod.ts";
import { tensor } from "../../src/tensor/creation.ts";

const worker = new URL("./workers/p2p.ts", import.meta.url);
const transport = Deno.env.get("DTRAIN_SHM") === "0" ? "gloo" : "shm";
const TIMEOUT_MS = 2000;

const run = (
  mode: string,
  worldSize: number,
  onLine?: Parameters<typeof runRanks>[0]["onLine"],
  env: Record<string, string> = {},
) =>
  runRanks({
    worker,
    worldSize,
    timeoutMs: 30_000,
    env: { MODE: mode, TEST_TIMEOUT_MS: String(TIMEOUT_MS), ...env },
    onLine,
  });

Deno.test(`over ${transport}, a blocking ring and batch, batchIsendIrecv with every other rank in every dtype, several tags, 4 MiB and messages beside an all-reduce arrive byte for byte`, async () => {
  const runs = await run("exchange", 3);
  assertAllOk(runs);
  for (const r of runs) assert.equal(r.result?.backend, transport);
});

Deno.test(`over ${transport}, a shape, dtype, size or tag mismatch fails both sides naming both ranks and tags, and the pair stays usable`, async () => {
  const runs = await run("mismatch", 2);
  assertAllOk(runs);
  const [sender, receiver] = runs.map((r) => r.result?.errors as string[]);
  assert.deepEqual(sender, receiver, "both sides report the same words");
  assert.deepEqual(sender, [
    "p2p message #0 from rank 0 to rank 1: rank 0 sends tag 5 f32 [2, 3] (24 bytes), rank 1 receives tag 5 f32 [3, 2] (24 bytes)",
    "p2p message #1 from rank 0 to rank 1: rank 0 sends tag 5 f32 [4] (16 bytes), rank 1 receives tag 5 i32 [4] (16 bytes)",
    "p2p message #2 from rank 0 to rank 1: rank 0 sends tag 5 f32 [4] (16 bytes), rank 1 receives tag 5 f32 [8] (32 bytes)",
    "p2p message #3 from rank 0 to rank 1: rank 0 sends tag 5 f32 [4] (16 bytes), rank 1 receives tag 6 f32 [4] (16 bytes)",
    "p2p message #4 from rank 0 to rank 1: rank 0 sends tag 5 f32 [4] (16 bytes), rank 1 receives tag 5 f32 [32768] (131072 bytes)",
    "p2p message #5 from rank 0 to rank 1: rank 0 sends tag 5 f32 [32768] (131072 bytes), rank 1 receives tag 5 f32 [4] (16 bytes)",
  ]);
});

// A receive posted before the kill fails on its pending transfer; one posted after it finds the
// connection already closed. Either is a "peer" failure naming the rank, so the group's diagnosis
// runs and adds that it died. Gloo's two paths once classified differently: each runs thrice.
// A blocking recv cannot wait for the diagnosis: the worker runs it through dist.diagnoseError.
for (const [lateMs, blocking] of [[0, false], [500, false], [0, true]] as const) {
  const call = blocking ? "a blocking recv, diagnosed by dist.diagnoseError," : "an irecv";
  Deno.test(`over ${transport}, SIGKILL of the peer fails ${call} posted ${lateMs ? "after" : "before"} it at once, naming it as dead`, async () => {
    for (let i = 0; i < (transport === "gloo" && !blocking ? 3 : 1); i++) {
      const runs = await run("kill", 2, (rank, line, procs) => {
        if (rank === 1 && line === "ready") procs[1].child.kill("SIGKILL");
      }, { LATE_MS: String(lateMs), BLOCKING: blocking ? "1" : "0" });
      const r = runs[0];
      assert.equal(r.code, 0, r.stderr);
      const cause = transport === "gloo"
        ? "connection to rank 1 failed \\(.*\\)"
        : "rank 1 died .*";
      assert.match(
        String(r.result?.error),
        new RegExp(`^recv from rank 1 \\(tag 3\\): ${cause}; rank 1 died \\(left the store`),
      );
      assert.equal(r.result?.code, "peer");
      assert.ok(Number(r.result?.ms) < TIMEOUT_MS, `took ${r.result?.ms} ms`);
    }
  });
}

for (
  const [side, waiting] of [["recv", "to send"], ["send", "to post the matching recv"]] as const
) {
  Deno.test(`over ${transport}, a ${side} with no matching call on the peer times out after the group timeout, naming the peer`, async () => {
    const runs = await run("missing", 2, undefined, { SIDE: side });
    assertAllOk(runs);
    // The group's diagnosis may add that rank 1 left since (it exits half a second later).
    const error = String(runs[0].result?.error);
    const to = side === "send" ? "to" : "from";
    const expected = `${side} ${to} rank 1 (tag 2): timed out after ${TIMEOUT_MS} ms waiting for ` +
      `rank 1 ${waiting}`;
    assert.ok(error.startsWith(expected), error);
    assert.ok(Number(runs[0].result?.ms) >= TIMEOUT_MS - 50);
  });
}

Deno.test(`over ${transport}, destroying the group fails a receive still running, at once`, async () => {
  const runs = await run("destroy", 2);
  assertAllOk(runs);
  const { error, ms } = runs[0].result as { error: string; ms: number };
  // Destroyed while it ran, or (when its thread came late) before it started.
  assert.match(error, /^recv from rank 1 \(tag 0\): the process group was destroyed/);
  assert.ok(ms < TIMEOUT_MS, `took ${ms} ms`);
});

Deno.test({
  name: "over shm+gloo (two hosts of two), messages within a host and between leaders arrive, " +
    "and one between non-leaders of different hosts is refused, saying why",
  ignore: transport !== "shm",
  fn: async () => {
    const runs = await runRanks({
      worker,
      worldSize: 4,
      timeoutMs: 30_000,
      env: (rank) => ({
        MODE: "hosts",
        TEST_TIMEOUT_MS: String(TIMEOUT_MS),
        DTRAIN_SHM_HOST: rank < 2 ? "host-a" : "host-b",
      }),
    });
    assertAllOk(runs);
    for (const r of runs) assert.equal(r.result?.backend, "shm+gloo");
    for (const r of [runs[1], runs[3]]) {
      assert.match(
        String(r.result?.refused),
        /^send: the shm\+gloo backend connects other hosts only through their leaders/,
      );
    }
  },
});

// The emu backend's transport is shared memory whatever DTRAIN_SHM says: once is enough.
Deno.test({
  name:
    "over emu, a ring of batchIsendIrecv on emu:<rank> tensors carries what the kernels before it wrote",
  ignore: transport !== "shm",
  fn: async () => {
    const runs = await run("emu", 2);
    assertAllOk(runs);
    for (const r of runs) assert.equal(r.result?.backend, "emu");
  },
});

Deno.test({
  name: "under DTRAIN_PROFILE every send and recv is on the timeline with its bytes, peer and tag",
  ignore: transport !== "shm",
  fn: async () => {
    const dir = await Deno.makeTempDir();
    try {
      const runs = await run("exchange", 2, undefined, { DTRAIN_PROFILE: `${dir}/trace` });
      assertAllOk(runs);
      const trace = JSON.parse(await Deno.readTextFile(`${dir}/trace.rank0.json`));
      const events = (trace.traceEvents as { name: string; args: Record<string, number> }[])
        .filter((e) => e.name === "send" || e.name === "recv");
      // The blocking pair and batch, one pair per dtype, four tags, the 4 MiB pair and the one
      // beside the all-reduce: 12 of each.
      assert.equal(events.filter((e) => e.name === "send").length, 12);
      assert.equal(events.filter((e) => e.name === "recv").length, 12);
      // seq: the message's number in its pair's stream, as the ledger numbers it.
      const { seq, ...args } = events[0].args;
      assert.deepEqual(args, { bytes: 60, peer: 1, tag: 7 });
      assert.ok(Number.isInteger(seq), `seq ${seq}`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("bad point-to-point arguments are refused before anything is posted, naming the argument", async () => {
  await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
  try {
    const t = tensor([1, 2]);
    assert.throws(() => send(t, 0), /^DistError: send: dst 0 is this rank itself/);
    assert.throws(() => isend(t, 3), /^DistError: isend: dst 3 is not a rank of this group/);
    assert.throws(() => irecv(t, 1.5), /^DistError: irecv: src 1.5 is not a rank of this group/);
    assert.throws(() => isend(t, 0, { tag: -1 }), /isend: tag must be an integer from 0 to/);
    assert.throws(() => isend(t, 0, { tag: 2 ** 32 }), /isend: tag must be an integer from 0 to/);
    assert.throws(() => P2POp(send as never, t, 0), /P2POp: op must be dist.isend or dist.irecv/);
    assert.throws(() => batchIsendIrecv([]), /batchIsendIrecv: ops must be a non-empty list/);
  } finally {
    await destroyProcessGroup();
  }
});
