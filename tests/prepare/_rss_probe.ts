// Runs prepare on the files named on the command line (gpt2, --workers from the environment's
// PROBE_WORKERS) and prints the process's peak resident memory in bytes (VmHWM), for the memory
// test and bench/tokenize.ts: a process of its own, so nothing else's memory counts.
import { prepare } from "../../src/prepare/prepare.ts";

const [out, ...inputs] = Deno.args;
const workers = Number(Deno.env.get("PROBE_WORKERS") ?? "1");
const start = performance.now();
const meta = await prepare({ tokenizer: "gpt2", inputs, out, force: true, workers });
const seconds = (performance.now() - start) / 1000;
const status = Deno.readTextFileSync("/proc/self/status");
const peak = Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) * 1024;
console.log(JSON.stringify({ peak, tokens: meta.trainTokens + meta.valTokens, seconds }));
