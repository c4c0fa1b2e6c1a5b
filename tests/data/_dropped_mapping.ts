// A fresh process (run with --expose-gc) for token_file_dispose_test.ts: drops a TokenFile without
// dispose(), first keeping a view of its tokens, then nothing, collecting garbage after each, and
// prints whether the file is still mapped (/proc/self/maps) as one JSON line.
import { data } from "../../mod.ts";

const path = Deno.args[0];
const mapped = () =>
  Deno.readTextFileSync("/proc/self/maps").split("\n").some((line) => line.endsWith(path));

/** Collects garbage and lets the FinalizationRegistry callbacks run (they run as tasks). */
async function collect(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    (globalThis as unknown as { gc: () => void }).gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// The TokenFile is made in a function so that nothing of this scope holds it.
const viewOf = () => data.TokenFile.openSync(path).tokens;
let view: Uint16Array | null = viewOf();
await collect();
const viewAfterGc = { mapped: mapped(), last: view[99] };
view = null;
await collect();
console.log(JSON.stringify({ viewAfterGc, droppedAfterGc: { mapped: mapped() } }));
