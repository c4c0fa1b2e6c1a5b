// The timeline: `--profile PATH` on a 2-rank train job gives one merged Chrome trace with a track
// per rank, and DDP's bucket all-reduces start while backward still runs.
import assert from "node:assert/strict";
import { runDeno } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { assertSucceeded, SMALL_JOB, train } from "../train/_train.ts";
import type { TraceEvent } from "../../src/profile/tracer.ts";
import { renderSvg } from "../../src/profile/svg.ts";

Deno.test("--profile on a 2-rank DDP job writes one trace with a track per rank, buckets overlapping backward", async () => {
  const dir = await Deno.makeTempDir({ prefix: "dtrain-profile-" });
  try {
    const path = `${dir}/trace.json`;
    const run = await train([
      ...SMALL_JOB,
      // Three wide layers: the first bucket is ready with a whole layer's backward still to run.
      ...["--hidden", "1024,1024,1024", "--epochs", "1", "--max-steps", "6"],
      ...["--snapshot", `${dir}/snapshot.safetensors`, "--nproc-per-node", "2"],
      ...["--master-port", String(freePort())],
      ...["--profile", path],
    ], { env: { DTRAIN_SHM: "1" } }); // README, "Every bucket overlapped"
    assertSucceeded(run);
    // Only the merged file is left: the launcher removed the per-rank parts.
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [
      "logs",
      "metrics.jsonl",
      "report.html",
      "snapshot.safetensors",
      "trace.json",
    ]);
    const events = (JSON.parse(await Deno.readTextFile(path)) as { traceEvents: TraceEvent[] })
      .traceEvents;
    const names = events.filter((e) => e.ph === "M" && e.name === "process_name")
      .map((e) => e.args?.name);
    assert.deepEqual(names, ["rank 0", "rank 1"]);
    for (const rank of [0, 1]) {
      const mine = events.filter((e) => e.ph === "X" && e.pid === rank);
      const count = (name: string) => mine.filter((e) => e.name === name).length;
      for (const name of ["data", "forward", "backward", "optimizer step", "wait for buckets"]) {
        assert.equal(count(name), 6, `rank ${rank}: ${name}`);
      }
      const buckets = mine.filter((e) => /^allReduce bucket \d+$/.test(e.name));
      assert.ok(buckets.length >= 6, `rank ${rank}: ${buckets.length} bucket all-reduces`);
      for (const b of buckets) {
        assert.equal(b.tid, 1);
        assert.ok(typeof b.args?.bytes === "number" && b.args.bytes > 0);
      }
      // Each step's first bucket is issued from a gradient hook, inside backward, and starts on
      // its native thread before backward ends: in most steps, since on a busy 2-core machine
      // that thread can wait for a core until backward is over.
      const backwards = mine.filter((e) => e.name === "backward");
      const first = buckets.filter((b) => b.args?.bucket === 0);
      assert.equal(first.length, backwards.length, `rank ${rank}: one bucket 0 per step`);
      const late = backwards.flatMap((bw, step) => first[step].ts < bw.ts + bw.dur! ? [] : [step]);
      assert.ok(late.length <= 2, `rank ${rank}: bucket 0 started after backward in steps ${late}`);
      // The buckets' times come from the native thread's clock, mapped onto JavaScript's: each
      // lies inside its step, after backward began and before the wait for buckets ended
      // (within 50 µs, the mapping's slack).
      const waits = mine.filter((e) => e.name === "wait for buckets");
      for (const b of buckets) {
        const inside = backwards.some((bw, step) =>
          bw.ts - 50 <= b.ts && b.ts + b.dur! <= waits[step].ts + waits[step].dur! + 50
        );
        assert.ok(inside, `rank ${rank}: ${b.name} at ${b.ts} µs lies in no step`);
      }
    }
    assert.match(renderSvg(events, { lastSteps: 2 }), /allReduce bucket 0/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("DTRAIN_PROFILE on a script outside the launcher writes its trace to the path itself", async () => {
  const dir = await Deno.makeTempDir({ prefix: "dtrain-profile-" });
  try {
    const script = `${dir}/script.ts`;
    await Deno.writeTextFile(
      script,
      `import { span } from "${new URL("../../src/profile/tracer.ts", import.meta.url)}";\n` +
        `span("forward", "compute", () => 1);\n`,
    );
    const run = await runDeno({
      timeoutMs: 30_000,
      args: [script],
      env: { DTRAIN_PROFILE: `${dir}/t.json` },
    });
    assert.equal(run.code, 0, run.stderr);
    const trace = JSON.parse(await Deno.readTextFile(`${dir}/t.json`));
    assert.deepEqual(
      trace.traceEvents.filter((e: TraceEvent) => e.ph === "X").map((e: TraceEvent) => e.name),
      ["forward"],
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
