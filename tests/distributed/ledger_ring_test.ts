// The ledger in one process: what an entry holds, the exact calling line, the ring's length,
// DTRAIN_LEDGER=0, and callerScope's one capture for many collectives.
import assert from "node:assert/strict";
import {
  allReduce,
  barrier,
  destroyProcessGroup,
  initProcessGroup,
} from "../../src/distributed/mod.ts";
import {
  callerScope,
  entryJson,
  ledgerEntries,
  ledgerOn,
  setLedgerSize,
  userFrame,
} from "../../src/distributed/ledger.ts";
import { tensorOf } from "../_harness/worker.ts";
import { site as siteIn } from "./_ledger.ts";

const HERE = "tests/distributed/ledger_ring_test.ts";
const site = (name: string) => siteIn(name, new URL(import.meta.url), HERE);

async function withWorld(fn: () => Promise<void>): Promise<void> {
  await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
  try {
    await fn();
  } finally {
    await destroyProcessGroup();
    setLedgerSize(2000);
  }
}

Deno.test("each collective is recorded with group, sequence, op, dtype, shape, bytes, times and its line", async () => {
  await withWorld(async () => {
    const x = tensorOf(new Float32Array(6));
    await allReduce(x); // site: first
    await barrier(); // site: second
    const [a, b] = ledgerEntries().map((e) => entryJson(e));
    assert.deepEqual(
      { ...a, enqueuedUs: 0, startedUs: 0, finishedUs: 0 },
      {
        group: "world",
        seq: 1,
        op: "allReduce",
        dtype: "f32",
        shape: [6],
        bytes: 24,
        enqueuedUs: 0,
        startedUs: 0,
        finishedUs: 0,
        site: site("first"),
      },
    );
    assert.ok(a.enqueuedUs > 0 && a.enqueuedUs <= a.startedUs && a.startedUs <= a.finishedUs);
    assert.equal(b.op, "barrier");
    assert.equal(b.seq, 2);
    assert.equal(b.site, site("second"));
  });
});

Deno.test("the ring keeps the last N; size 0 records nothing", async () => {
  await withWorld(async () => {
    setLedgerSize(3);
    const x = tensorOf(new Float32Array(2));
    for (let i = 0; i < 5; i++) await allReduce(x);
    assert.deepEqual(ledgerEntries().map((e) => e.seq), [3, 4, 5]);
    setLedgerSize(0);
    assert.equal(ledgerOn(), false);
    await allReduce(x);
    assert.deepEqual(ledgerEntries(), []);
  });
});

Deno.test("callerScope: the collectives issued inside share the scope's one call site", async () => {
  await withWorld(async () => {
    const x = tensorOf(new Float32Array(2));
    const issue = async () => {
      await allReduce(x);
      await allReduce(x);
    };
    await callerScope(issue); // site: scope
    const entries = ledgerEntries();
    assert.equal(entries.length, 2);
    assert.equal(entries[0].site, entries[1].site, "one capture for both");
    assert.equal(entries[0].site.text, site("scope"));
  });
});

Deno.test("userFrame skips dtrain's own frames, then its library's, and says ? when there is no other", () => {
  const src = new URL("../../src/distributed/x.ts", import.meta.url).href;
  const job = new URL("../../src/train/job.ts", import.meta.url).href;
  const user = new URL("../../train.ts", import.meta.url).href;
  const stack = `Error\n    at f (${src}:10:5)\n    at g (${user}:57:3)\n    at h (${user}:80:1)`;
  assert.equal(userFrame(stack), "train.ts:57");
  // dtrain's train job has no frame outside src/: its own line, past the library's.
  assert.equal(
    userFrame(`Error\n    at f (${src}:10:5)\n    at g (${job}:3:1)`),
    "src/train/job.ts:3",
  );
  assert.equal(userFrame(`Error\n    at f (${src}:10:5)`), "?");
  assert.equal(userFrame("Error\n    at <anonymous>"), "?");
});
