// A fresh process for tests/data/token_file_mmap_test.ts: serves batches of a large token file
// through TokenFile or DistributedDataLoader and prints them, with this process's resident memory
// now and at its peak, as one JSON line. A fresh process, because the test runner's own memory
// (type checking) is already over the limit the test holds the mapping to.
import { data, manualSeed } from "../../mod.ts";

/** What to read: nanoGPT windows at `offsets`, or one llm.c batch for each of `ranks`. */
type Spec =
  | { kind: "file"; path: string; offsets: number[]; blockSize: number; randomBatches: number }
  | { kind: "shard"; pattern: string; ranks: number[]; blockSize: number; world: number };

/** VmRSS and VmHWM (the peak) of this process, in bytes. */
function memory(): { rss: number; peak: number } {
  const status = Deno.readTextFileSync("/proc/self/status");
  const kb = (name: string) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+) kB$`, "m"))![1]);
  return { rss: kb("VmRSS") * 1024, peak: kb("VmHWM") * 1024 };
}

const spec = JSON.parse(Deno.args[0]) as Spec;
const x: number[][] = [], y: number[][] = [];
if (spec.kind === "file") {
  using file = data.TokenFile.openSync(spec.path);
  const [bx, by] = file.batchAt(spec.offsets, spec.blockSize);
  x.push(...bx.tolist() as number[][]);
  y.push(...by.tolist() as number[][]);
  // getBatch's offsets span the whole file: pages all over it are touched.
  manualSeed(39);
  for (let k = 0; k < spec.randomBatches; k++) {
    for (const t of file.getBatch(8, spec.blockSize)) t.dispose();
  }
} else {
  for (const rank of spec.ranks) {
    using loader = new data.DistributedDataLoader(
      spec.pattern,
      1,
      spec.blockSize,
      rank,
      spec.world,
    );
    const [bx, by] = loader.nextBatch();
    x.push(...bx.tolist() as number[][]);
    y.push(...by.tolist() as number[][]);
  }
}
console.log(JSON.stringify({ x, y, ...memory() }));
