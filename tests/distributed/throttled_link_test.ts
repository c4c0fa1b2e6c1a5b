// The throttled link of tests/_harness/throttled_link.ts is what it claims (a 50 ms round trip,
// 100 Mbit/s), and dtrain's ranks work across it: one rank per host all-reduces with the right
// sums, and every small all-reduce takes at least a round trip, so the delay is on the path of
// Gloo's own connections, not only the store's. Needs root; skipped where the link cannot be made.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { LINK_SKIP, ThrottledLink } from "../_harness/throttled_link.ts";
import { tail } from "../infrastructure/netns_cluster.ts";

const WORKER = fileURLToPath(new URL("./workers/link_allreduce.ts", import.meta.url));
const RUN_TIMEOUT_MS = 30_000;

if (LINK_SKIP !== null) console.warn(`throttled_link_test.ts: skipping: ${LINK_SKIP}`);

Deno.test({
  name:
    "a throttled link has a 50 ms round trip and 100 Mbit/s, and one rank per host all-reduces across it, each all-reduce taking a round trip",
  ignore: LINK_SKIP !== null,
  async fn() {
    const link = await ThrottledLink.create();
    let closed = false;
    try {
      const rtt = await link.rttMs();
      assert.ok(rtt >= 45 && rtt <= 80, `round trip ${rtt.toFixed(1)} ms, expected 45–80`);
      const mbit = await link.bandwidthMbit();
      assert.ok(mbit >= 80 && mbit <= 110, `bandwidth ${mbit.toFixed(1)} Mbit/s, expected 80–110`);

      const runs = await link.runRanks([WORKER], { ROUNDS: "8" }, RUN_TIMEOUT_MS);
      const results = runs.map((run) => {
        assert.equal(run.code, 0, `rank ${run.host}:\n${tail(run.stdout + run.stderr, 30)}`);
        return JSON.parse(run.stdout.trim().split("\n").at(-1)!) as {
          backend: string;
          smallMs: number[];
          bigMs: number;
          wrong: number;
        };
      });
      for (const [rank, result] of results.entries()) {
        assert.equal(result.backend, "gloo", `rank ${rank} is not on Gloo`);
        assert.equal(result.wrong, 0, `rank ${rank}: ${result.wrong} elements are not 1 + 2`);
        // The first may include connecting; every later one crosses the link at least there and
        // back (a rank cannot have the sum before the other rank's data has arrived and its own
        // has been acknowledged as taken).
        const steady = result.smallMs.slice(1);
        const fastest = Math.min(...steady);
        assert.ok(
          fastest >= 0.9 * rtt,
          `rank ${rank}: a 64-byte all-reduce took ${fastest.toFixed(1)} ms, less than the ` +
            `round trip (${rtt.toFixed(1)} ms): the delay is not on Gloo's path`,
        );
        // 4 MiB each way at 100 Mbit/s is at least 0.33 s.
        assert.ok(
          result.bigMs >= 300,
          `rank ${rank}: a 4 MiB all-reduce took ${
            result.bigMs.toFixed(0)
          } ms, faster than the link`,
        );
        console.log(
          `rank ${rank}: rtt ${rtt.toFixed(1)} ms, ${mbit.toFixed(1)} Mbit/s; all-reduce 64 B ` +
            `${steady.map((ms) => ms.toFixed(1)).join(" ")} ms, 4 MiB ${
              result.bigMs.toFixed(0)
            } ms`,
        );
      }
      console.log(await link.close());
      closed = true;
      assertGone([...link.hosts.map((h) => h.name), link.router]);
    } finally {
      if (!closed) await link.close();
    }
  },
});

/** Fails naming any of `namespaces` that still exists. */
function assertGone(namespaces: string[]): void {
  const listed = new TextDecoder().decode(
    new Deno.Command("ip", { args: ["netns", "list"], stdout: "piped" }).outputSync().stdout,
  );
  const left = namespaces.filter((name) => listed.includes(name));
  assert.deepEqual(left, [], `namespaces left behind: ${left.join(", ")}`);
}

Deno.test({
  name:
    "a throttled link whose maker is SIGKILLed leaves no namespace or process behind (its watchdog removes them)",
  ignore: LINK_SKIP !== null,
  async fn() {
    const harness = new URL("../_harness/throttled_link.ts", import.meta.url).href;
    const maker = new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        `const { ThrottledLink } = await import(${JSON.stringify(harness)});
        const link = await ThrottledLink.create();
        console.log(JSON.stringify([...link.hosts.map((h) => h.name), link.router]));
        await new Promise(() => setInterval(() => {}, 1000));`,
      ],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const reader = maker.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    maker.kill("SIGKILL");
    await maker.status;
    await reader.cancel();
    const stderr = await new Response(maker.stderr).text();
    assert.ok(text.includes("\n"), `the link was not made:\n${tail(stderr)}`);
    const namespaces = JSON.parse(text) as string[];
    const deadline = Date.now() + 5000;
    for (;;) {
      try {
        assertGone(namespaces);
        break;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  },
});
