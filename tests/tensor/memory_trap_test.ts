/**
 * The memory trap (issue 8): a synchronous training loop that never calls `tidy` or `dispose` and
 * never awaits keeps its native memory flat, because dropped tensors are freed by the garbage
 * collector itself (see [Note: cpu memory is JavaScript memory] in src/tensor/device/cpu.ts). It
 * runs as its own process with the README's flags, so the test runner's heap does not blur the
 * numbers.
 * @module
 */

import assert from "node:assert/strict";
import { runDeno } from "../_harness/processes.ts";

const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;

Deno.test("10,000 MLP steps without tidy, dispose or await grow native memory by < 10% after step 500", async () => {
  const run = await runDeno({ args: ["tests/tensor/workers/sync_loop.ts"], timeoutMs: 120_000 });
  assert.equal(run.code, 0, `sync_loop exited with ${run.code}:\n${run.stderr}`);
  const { steps, at500, end, first, last } = JSON.parse(run.stdout.trim());
  assert.equal(steps, 10_000);
  assert.ok(last < first, `the loop trained: loss went from ${first} to ${last}`);
  // Native memory: the resident set outside the V8 heap (tensors' bytes live there).
  const native = (m: Deno.MemoryUsage) => m.rss - m.heapTotal;
  assert.ok(
    native(end) < native(at500) * 1.1,
    `native memory grew from ${mib(native(at500))} after step 500 to ${mib(native(end))} ` +
      `after step ${steps} (RSS ${mib(at500.rss)} to ${mib(end.rss)})`,
  );
  // Before the fix the loop leaked 64 KiB a step: 600 MiB here. The heap keeps ~100 bytes of
  // bookkeeping per dropped tensor until an event-loop turn, so it may grow a little.
  assert.ok(end.rss < at500.rss * 1.25, `RSS grew from ${mib(at500.rss)} to ${mib(end.rss)}`);
});
