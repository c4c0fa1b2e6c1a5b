/**
 * Chapter 7's trace: the train job on a small GPT (2 blocks, width 64, block 64; 2 ranks, DDP over
 * shared memory), 8 steps with `--profile`, drawn with src/profile/svg.ts (its last 2 steps).
 * Writes 07_trace.json (open it in https://ui.perfetto.dev) and 07_trace.svg beside itself.
 *
 *     deno run -A docs/guide/figures/07_trace.ts
 * @module
 */

import { renderSvg } from "../../../src/profile/svg.ts";
import type { TraceEvent } from "../../../src/profile/tracer.ts";

const here = new URL("./", import.meta.url);
const dir = await Deno.makeTempDir({ prefix: "dtrain-guide-trace-" });
try {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--v8-flags=--expose-gc",
      "src/train/main.ts",
      "--model=gpt",
      "--n-layer=2",
      "--n-embd=64",
      "--block-size=64",
      "--max-steps=8",
      `--snapshot=${dir}/snapshot.safetensors`,
      `--profile=${dir}/trace.json`,
    ],
    cwd: new URL("../../../", import.meta.url),
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
  const trace = Deno.readTextFileSync(`${dir}/trace.json`);
  Deno.writeTextFileSync(new URL("07_trace.json", here), trace);
  const parsed = JSON.parse(trace);
  const events: TraceEvent[] = Array.isArray(parsed) ? parsed : parsed.traceEvents;
  Deno.writeTextFileSync(new URL("07_trace.svg", here), renderSvg(events, { lastSteps: 2 }));
  console.log(`07_trace.svg: ${events.length} events`);
} finally {
  Deno.removeSync(dir, { recursive: true });
}
