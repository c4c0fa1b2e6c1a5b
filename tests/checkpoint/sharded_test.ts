// Sharded checkpoints: saved by FSDP on some number of real rank processes, resumed on another
// (2 → 3, 3 → 2, 3 → 1), training must end as if it had never stopped; plus the consolidated file,
// and the refusals of bad indexes and files, in one process.
import assert from "node:assert/strict";
import { assertAllOk, type RankResult, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { consolidate, load, loadSharded, saveSharded } from "../../src/checkpoint/mod.ts";
import { CheckpointError } from "../../src/safetensors/errors.ts";
import { Linear } from "../../src/nn/layers.ts";
import { type Kind, STEPS, trainReference } from "../parallel/workers/fsdp_problem.ts";

/** Steps trained before the checkpoint. */
const SAVE_STEPS = 2;

const worker = new URL("./sharded_worker.ts", import.meta.url);
type Params = Record<string, number[]>;

/** Runs the worker on `worldSize` ranks; every rank must succeed and leave no process behind. */
async function run(worldSize: number, env: Record<string, string>): Promise<RankResult[]> {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize,
    timeoutMs: 60_000,
    env: { ...env, ...markerEnv(marker) },
  });
  assert.deepEqual(
    markedProcesses(marker),
    [],
    `left behind: ${describe(markedProcesses(marker))}`,
  );
  assertAllOk(runs);
  return runs;
}

function relativeError(got: number[], want: number[]): number {
  let diff = 0, norm = 0;
  want.forEach((w, i) => {
    diff += (got[i] - w) ** 2;
    norm += w ** 2;
  });
  return Math.sqrt(diff / Math.max(norm, 1e-12));
}

function assertClose(actual: Params, expected: Params, what: string): void {
  assert.deepEqual(Object.keys(actual), Object.keys(expected), `${what}: names`);
  for (const [name, want] of Object.entries(expected)) {
    const err = relativeError(actual[name], want);
    assert.ok(err <= 1e-5, `${what}: ${name} has relative error ${err}`);
  }
}

for (
  const [kind, from, to] of [["gpt", 2, 3], ["mlp", 3, 2], ["mlp", 3, 1]] as [
    Kind,
    number,
    number,
  ][]
) {
  Deno.test(`a ${kind} checkpoint saved by FSDP on ${from} ranks resumes on ${to} as if uninterrupted; consolidate writes the full model`, async () => {
    const dir = Deno.makeTempDirSync();
    try {
      await run(from, { CASE: "save", KIND: kind, DIR: dir, SAVE_STEPS: String(SAVE_STEPS) });
      const resumed = (await run(to, { CASE: "resume", KIND: kind, DIR: dir }))
        .map((r) => r.result!.final as Params);
      const sizes = Array.from({ length: STEPS }, (_, step) => (step < SAVE_STEPS ? from : to));
      const reference = trainReference(kind, sizes, STEPS).final;
      resumed.forEach((final, rank) => assertClose(final, reference, `rank ${rank} of ${to}`));
      const atSave = trainReference(kind, from, SAVE_STEPS).final;
      const { tensors } = load(`${dir}/consolidated.safetensors`);
      const consolidated = Object.fromEntries(
        Object.entries(atSave).map(([name]) => [name, Array.from(tensors[name].toArray())]),
      );
      assertClose(consolidated, atSave, "consolidated");
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
}

Deno.test("ranks that disagree on an optimizer's step count are refused by every rank, naming the parameter and both ranks; the previous save stays", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-sharded-disagree-" });
  try {
    for (const { result } of await run(2, { KIND: "mlp", DIR: dir, CASE: "disagree" })) {
      assert.match(
        result!.error as string,
        new RegExp(
          `ranks disagree on the optimizer's step of 0\\.weight: rank 0 has ${STEPS}, rank 1 has ${
            STEPS + 1
          }`,
        ),
      );
      assert.equal(result!.generation, 1);
      assert.deepEqual(result!.files, [
        "gen-1",
        "gen-1/rank-0.json",
        "gen-1/rank-0.safetensors",
        "gen-1/rank-1.json",
        "gen-1/rank-1.safetensors",
        "gen-2", // the refused save's folder, empty: the next save clears it (as after a crash)
        "index.json",
      ]);
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("a save that crashed before its commit leaves the previous checkpoint loadable; the next save clears it", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const model = new Linear(3, 2);
    await saveSharded(dir, { model, extra: { step: 1 } });
    // What a crash leaves: a new generation's files, no index naming them.
    Deno.mkdirSync(`${dir}/gen-2`);
    Deno.writeTextFileSync(`${dir}/gen-2/rank-0.safetensors`, "half a file");
    const copy = new Linear(3, 2);
    assert.deepEqual(loadSharded(dir, { model: copy }), { step: 1 });
    assert.deepEqual(copy.weight.toArray(), model.weight.toArray());
    await saveSharded(dir, { model, extra: { step: 2 } });
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), ["gen-2", "index.json"]);
    assert.deepEqual(loadSharded(dir, { model: copy }), { step: 2 });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("bad sharded checkpoints are refused with an error naming the file and the problem", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const model = new Linear(3, 2);
    await saveSharded(dir, { model });
    const index = `${dir}/index.json`;
    const good = Deno.readTextFileSync(index);
    const refuses = (pattern: RegExp, target: Linear = new Linear(3, 2)) => {
      assert.throws(() => loadSharded(dir, { model: target }), (err: Error) => {
        assert.ok(err instanceof CheckpointError, `expected a CheckpointError, got ${err}`);
        assert.match(err.message, pattern);
        return true;
      });
    };
    refuses(/index\.json: model\/weight is \[2, 3\], the model's is \[3, 2\]/, new Linear(2, 3));
    Deno.writeTextFileSync(index, "{not json");
    refuses(/index\.json: is not valid JSON/);
    const parsed = JSON.parse(good);
    Deno.writeTextFileSync(index, JSON.stringify({ ...parsed, format: "other/1" }));
    refuses(/index\.json: format: /);
    parsed.tensors["model/weight"].pieces[0].length = [1, 3];
    Deno.writeTextFileSync(index, JSON.stringify(parsed));
    refuses(/index\.json: model\/weight: pieces cover 3 elements of 6/);
    parsed.tensors["model/weight"].pieces.push({
      file: 0,
      key: "x",
      start: [0, 2],
      length: [2, 1],
    });
    Deno.writeTextFileSync(index, JSON.stringify(parsed));
    refuses(
      /index\.json: model\/weight: piece 1 \(start \[0,2\], length \[2,1\]\) overlaps piece 0/,
    );
    parsed.tensors["model/weight"].pieces[1] = { file: 0, key: "x", start: [1, 0], length: [2, 3] };
    Deno.writeTextFileSync(index, JSON.stringify(parsed));
    refuses(/piece 1 \(start \[1,0\], length \[2,3\]\) is not inside the shape \[2,3\]/);
    Deno.writeTextFileSync(index, good);
    Deno.writeTextFileSync(`${dir}/${JSON.parse(good).files[0]}`, "garbage");
    refuses(/rank-0\.safetensors: /);
    Deno.removeSync(index);
    refuses(/index\.json: no sharded checkpoint here/);
    assert.throws(() => consolidate(dir, `${dir}/out.safetensors`), /no sharded checkpoint here/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("the consolidate command line writes the full model, and names a missing checkpoint", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const model = new Linear(3, 2);
    await saveSharded(dir, { model });
    const cli = new URL("../../src/checkpoint/sharded_cli.ts", import.meta.url);
    const run = (...args: string[]) =>
      new Deno.Command(Deno.execPath(), { args: ["run", "-A", cli.href, ...args] }).outputSync();
    const ok = run(dir, `${dir}/full.safetensors`);
    assert.equal(ok.code, 0, new TextDecoder().decode(ok.stderr));
    assert.deepEqual(
      load(`${dir}/full.safetensors`).tensors.weight.toArray(),
      model.weight.toArray(),
    );
    const missing = run(`${dir}/nothing`, `${dir}/x.safetensors`);
    assert.equal(missing.code, 1);
    assert.match(
      new TextDecoder().decode(missing.stderr),
      /nothing\/index\.json: no sharded checkpoint here/,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
