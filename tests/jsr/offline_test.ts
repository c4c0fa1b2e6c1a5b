// An offline cluster starts: a job that imports dtrain (mod.ts) resolves no npm package it does not
// use (the GPT-2 tokenizer's js-tiktoken is imported only when a script tokenizes), so a node with
// Deno's cache prepared (`deno cache`, or a vendored project: docs/reference/library.md) and no
// network at all runs a 2-rank job. The host is a network namespace of its own with only loopback.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { ROOT } from "../_harness/processes.ts";

const JOB = fileURLToPath(new URL("./workers/offline_job.ts", import.meta.url));
const canUnshare = Deno.uid() === 0;

/** The npm packages in `script`'s module graph (`deno info`: what a run of it would resolve). */
function npmPackagesOf(script: string): string[] {
  const out = new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", script],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: { kind?: string; specifier: string }[];
  };
  return graph.modules.filter((m) => m.kind === "npm").map((m) => m.specifier).sort();
}

Deno.test("a job importing mod.ts resolves zod alone of the npm packages", () => {
  // js-tiktoken (and its base64-js) only when a script tokenizes with GPT-2's BPE.
  assert.deepEqual(npmPackagesOf(JOB), ["npm:/zod@4.1.12"]);
});

Deno.test({
  name: "a 2-rank job starts and runs on a host with no network, from the prepared cache",
  ignore: !canUnshare,
  async fn() {
    const launch = [
      Deno.execPath(),
      ...["run", "-A", "--cached-only", `${ROOT}src/launch/main.ts`, "--nproc-per-node", "2", JOB],
    ].map((a) => `'${a}'`).join(" ");
    const out = await new Deno.Command("unshare", {
      // Only loopback, up: no route to any registry.
      args: ["-n", "sh", "-c", `ip link set lo up && exec ${launch}`],
      cwd: ROOT,
      env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(90_000),
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, text);
    assert.match(text, /\[rank 0\] sum 3/);
    assert.match(text, /\[rank 1\] sum 3/);
  },
});
