/**
 * Issue 40's benchmark row (2): DiLoCo (H = 50) against DDP on the same throttled link and the
 * same token budget. Two hosts (network namespaces) joined by tests/_harness/throttled_link.ts
 * (100 Mbit/s each way, 25 ms each way: a 50 ms round trip), one replica on each; nanoGPT's
 * Shakespeare character model scaled down to train on a 2-core machine in minutes
 * (bench/diloco_link_worker.ts). Runs DDP, then DiLoCo, on the same link, and prints a Markdown
 * table: validation loss, wall time of the training loop, bytes the collectives sent and bytes
 * that crossed the link (both hosts' interface counters), and DiLoCo's ratios to DDP. Needs root.
 * Not a test (a few minutes).
 *
 *   deno run -A bench/diloco_link.ts [--data=../shared/data/tinyshakespeare/input.txt]
 *     [--steps=500] [--h=50] [other flags of bench/diloco_link_worker.ts]
 * @module
 */

import { fileURLToPath } from "node:url";
import { LINK_SKIP, ThrottledLink } from "../tests/_harness/throttled_link.ts";
import { tail } from "../tests/infrastructure/netns_cluster.ts";
import { argValue } from "./workload.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const WORKER = fileURLToPath(new URL("./diloco_link_worker.ts", import.meta.url));
/** One run's bound: a hung replica must not hold the machine. */
const RUN_TIMEOUT_MS = 30 * 60_000;

if (LINK_SKIP !== null) {
  console.error(`bench/diloco_link.ts: cannot make the throttled link: ${LINK_SKIP}`);
  Deno.exit(2);
}
const data = argValue(Deno.args, "data", `${ROOT}../shared/data/tinyshakespeare/input.txt`);
try {
  Deno.statSync(data);
} catch {
  console.error(`bench/diloco_link.ts: no text at ${data} (pass --data=PATH)`);
  Deno.exit(2);
}
// Every flag but --data goes to the workers as given; --mode is the bench's own.
const passed = Deno.args.filter((a) => !a.startsWith("--data=") && !a.startsWith("--mode="));

interface Replica {
  valLoss: number;
  trainLoss: number;
  wallSeconds: number;
  bytes: number;
}
interface Row {
  mode: string;
  replicas: Replica[];
  linkBytes: number;
}

async function runMode(link: ThrottledLink, mode: "ddp" | "diloco"): Promise<Row> {
  const before = await Promise.all([link.txBytes(0), link.txBytes(1)]);
  const runs = await link.runRanks(
    [WORKER, `--mode=${mode}`, `--data=${data}`, ...passed],
    {},
    RUN_TIMEOUT_MS,
  );
  const replicas = runs.map((run) => {
    if (run.code !== 0) {
      throw new Error(`${mode} rank ${run.host} failed:\n${tail(run.stdout + run.stderr, 30)}`);
    }
    return JSON.parse(run.stdout.trim().split("\n").at(-1)!) as Replica;
  });
  const after = await Promise.all([link.txBytes(0), link.txBytes(1)]);
  const linkBytes = after[0] - before[0] + after[1] - before[1];
  console.error(`${mode}: ${JSON.stringify({ replicas, linkBytes })}`);
  return { mode, replicas, linkBytes };
}

const link = await ThrottledLink.create();
let rows: Row[];
let rtt: number, mbit: number;
try {
  rtt = await link.rttMs();
  mbit = await link.bandwidthMbit();
  console.error(`link: round trip ${rtt.toFixed(1)} ms, ${mbit.toFixed(1)} Mbit/s`);
  rows = [await runMode(link, "ddp"), await runMode(link, "diloco")];
} finally {
  console.error(await link.close());
}

const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
const [ddp, diloco] = rows;
const wall = (row: Row) => Math.max(...row.replicas.map((r) => r.wallSeconds));
const sent = (row: Row) => row.replicas.reduce((sum, r) => sum + r.bytes, 0);
console.log(
  `Link: ${rtt.toFixed(1)} ms round trip, ${mbit.toFixed(1)} Mbit/s (measured). ` +
    `Flags: ${passed.join(" ") || "(defaults)"}\n`,
);
console.log(
  "| | validation loss (rank 0 / rank 1) | training loss, last 10 steps | wall time (s) | " +
    "collectives' bytes (both ranks, MB) | bytes on the link (both hosts, MB) |",
);
console.log("|---|---|---|---|---|---|");
for (const row of rows) {
  const [a, b] = row.replicas;
  console.log(
    `| ${row.mode === "ddp" ? "DDP" : "DiLoCo"} | ${a.valLoss.toFixed(4)} / ${
      b.valLoss.toFixed(4)
    } | ${a.trainLoss.toFixed(4)} | ${wall(row).toFixed(1)} | ${mb(sent(row))} | ${
      mb(row.linkBytes)
    } |`,
  );
}
console.log(
  `| DiLoCo / DDP | ${(diloco.replicas[0].valLoss / ddp.replicas[0].valLoss).toFixed(4)} | | ${
    (wall(diloco) / wall(ddp)).toFixed(3)
  } | ${(sent(diloco) / sent(ddp)).toFixed(4)} | ${
    (diloco.linkBytes / ddp.linkBytes).toFixed(4)
  } |`,
);
