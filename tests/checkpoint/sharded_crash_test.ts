// A sharded save SIGKILLed on real rank processes at four points of its commit protocol: a rank
// half-way through its shard file, a rank's shard file in place but not its piece list, the new
// index written but not yet renamed, the new index renamed but the old generation not yet removed.
// The same for an asynchronous save killed in its background writer, while the next training
// step runs. The checkpoint the index names loads, byte for byte the previous one before the rename and the
// new one after it; nothing half-written is visible; the next save (on another world size)
// commits a folder with nothing left over from the crash.
import assert from "node:assert/strict";
import { runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { loadSharded, saveSharded } from "../../src/checkpoint/mod.ts";
import { buildModel, buildOptimizer, stateValues } from "../parallel/workers/fsdp_problem.ts";
import { digests } from "./_digests.ts";
import { listing } from "./_listing.ts";

const worker = new URL("./sharded_crash_worker.ts", import.meta.url);
type Params = Record<string, number[]>;

/** Loads the checkpoint in `dir` into a fresh model and AdamW in this process (world size 1). */
function loadFresh(dir: string): { values: Params; extra: Record<string, unknown> } {
  const model = buildModel("mlp");
  const extra = loadSharded(dir, { model, optimizer: buildOptimizer(model.parameters()) });
  return { values: stateValues(model.stateDict()), extra };
}

/** What each crash point leaves in the folder, beside the checkpoints: proof it crashed there. */
const POINTS = [
  {
    point: "shard-write",
    rank: 1,
    committed: false,
    evidence: (files: string[]) =>
      files.some((f) => /^gen-2\/\.rank-1\.safetensors\..+\.tmp$/.test(f)) &&
      !files.includes("gen-2/rank-1.safetensors"),
  },
  {
    point: "pieces",
    rank: 1,
    committed: false,
    evidence: (files: string[]) =>
      files.includes("gen-2/rank-1.json") && !files.includes("gen-2/rank-1.safetensors"),
  },
  {
    point: "index-rename",
    rank: 0,
    committed: false,
    evidence: (files: string[], dir: string) =>
      files.filter((f) => /^\.index\.json\..+\.tmp$/.test(f)).some((f) =>
        JSON.parse(Deno.readTextFileSync(`${dir}/${f}`)).generation === 2
      ),
  },
  {
    point: "cleanup",
    rank: 0,
    committed: true,
    evidence: (files: string[]) => files.includes("gen-1/rank-0.safetensors"),
  },
];

// A background save (ASYNC=1) is killed in its writer thread at the points that thread reaches.
const CASES = [
  ...POINTS.map((p) => ({ ...p, background: false })),
  ...POINTS.filter((p) => p.point !== "pieces").map((p) => ({ ...p, background: true })),
];

for (const { point, rank, committed, evidence, background } of CASES) {
  const kind = background ? "an asynchronous sharded save's background writer" : "a sharded save";
  Deno.test(`${kind} SIGKILLed at "${point}" (rank ${rank} of 2) leaves the ${committed ? "new" : "previous"} checkpoint loadable and nothing half-written visible; the next save commits a clean folder`, async () => {
    const dir = Deno.makeTempDirSync({ prefix: "dtrain_sharded_crash_" });
    try {
      const marker = crypto.randomUUID();
      let crashed = -1;
      const runs = await runRanks({
        worker,
        worldSize: 2,
        timeoutMs: 60_000,
        env: {
          DIR: dir,
          CRASH_POINT: point,
          CRASH_RANK: String(rank),
          ASYNC: background ? "1" : "0",
          ...markerEnv(marker),
        },
        // The whole job goes down with the rank, as under the launcher.
        onLine: (r, line, procs) => {
          if (line !== `crash: ${point}`) return;
          crashed = r;
          for (const p of procs) {
            try {
              if (p.rank !== r && !p.exited) p.child.kill("SIGKILL");
            } catch {
              // exited between the check and the kill
            }
          }
        },
      });
      assert.deepEqual(markedProcesses(marker), [], describe(markedProcesses(marker)));
      const stderr = runs.map((r) => `rank ${r.rank}: ${r.stderr}`).join("\n");
      assert.equal(crashed, rank, `rank ${rank} did not reach "${point}":\n${stderr}`);
      assert.equal(runs[rank].signal, "SIGKILL", stderr);
      const { saved, next, digests: before } = runs[0].result as {
        saved: Params;
        next: Params;
        digests: Record<string, string>;
      };

      const files = listing(dir);
      assert.ok(evidence(files, dir), `no trace of a crash at "${point}": ${files.join(", ")}`);
      const index = JSON.parse(Deno.readTextFileSync(`${dir}/index.json`));
      assert.equal(index.generation, committed ? 2 : 1, "the generation the index names");
      if (!committed) assert.deepEqual(await digests(dir), before, "the previous checkpoint");
      const visible = loadFresh(dir);
      assert.deepEqual(visible.extra, { step: committed ? 2 : 1 });
      assert.deepEqual(visible.values, committed ? next : saved);

      // The next save, in this process (1 rank): it commits, and only its files remain.
      const model = buildModel("mlp");
      const optimizer = buildOptimizer(model.parameters());
      loadSharded(dir, { model, optimizer });
      await saveSharded(dir, { model, optimizer, extra: { step: 3 } });
      const generation = committed ? 3 : 2;
      assert.deepEqual(listing(dir), [
        `gen-${generation}`,
        `gen-${generation}/rank-0.json`,
        `gen-${generation}/rank-0.safetensors`,
        "index.json",
      ]);
      const after = loadFresh(dir);
      assert.deepEqual(after.extra, { step: 3 });
      assert.deepEqual(after.values, visible.values);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
}
