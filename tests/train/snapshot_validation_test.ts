// Snapshot files are untrusted input: bad metadata or a bad header makes `train` exit 2 with one
// message naming the file and the field, never a stack trace, never exit 0 on garbage.
import assert from "node:assert/strict";
import { join } from "node:path";
import { load, save } from "../../src/checkpoint/mod.ts";
import { withTempDir } from "../_harness/processes.ts";
import { assertSucceeded, SMALL_JOB, train } from "./_train.ts";

/** Rewrites the snapshot at `path` with its `dtrain` metadata passed through `edit`. */
function editMetadata(path: string, edit: (meta: Record<string, unknown>) => unknown): void {
  const { tensors, metadata } = load(path);
  try {
    const edited = edit(JSON.parse(metadata.dtrain));
    save(path, tensors, {
      ...metadata,
      dtrain: typeof edited === "string" ? edited : JSON.stringify(edited),
    });
  } finally {
    for (const t of Object.values(tensors)) t.dispose();
  }
}

/** Rewrites the header of `path` so that its first tensor is listed twice. */
function duplicateFirstTensor(path: string): string {
  const bytes = Deno.readFileSync(path);
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = new TextDecoder().decode(bytes.subarray(8, 8 + n)).trimEnd();
  const json = JSON.parse(header);
  const name = Object.keys(json).find((k) => k !== "__metadata__")!;
  const twice = `${header.slice(0, -1)},${JSON.stringify(name)}:${JSON.stringify(json[name])}}`;
  const encoded = new TextEncoder().encode(twice);
  const out = new Uint8Array(8 + encoded.length + bytes.length - 8 - n);
  new DataView(out.buffer).setBigUint64(0, BigInt(encoded.length), true);
  out.set(encoded, 8);
  out.set(bytes.subarray(8 + n), 8 + encoded.length);
  Deno.writeFileSync(path, out);
  return name;
}

type Case = { name: string; corrupt: (path: string) => RegExp };

const CASES: Case[] = [
  {
    name: 'epochsRun "abc"',
    corrupt: (p) => {
      editMetadata(p, (m) => ({ ...m, epochsRun: "abc" }));
      return /snapshot metadata field epochsRun: .*expected number.* \(got "abc"\)$/;
    },
  },
  {
    name: "negative epochsRun",
    corrupt: (p) => {
      editMetadata(p, (m) => ({ ...m, epochsRun: -1 }));
      return /snapshot metadata field epochsRun: Too small.* \(got -1\)$/;
    },
  },
  {
    name: "no sampler state",
    corrupt: (p) => {
      editMetadata(p, ({ sampler: _, ...m }) => m);
      return /snapshot metadata field sampler: .*expected object, received undefined/;
    },
  },
  {
    name: "an RNG seed that is not a number",
    corrupt: (p) => {
      editMetadata(p, (m) => ({ ...m, rng: { seed: "x", offset: "0" } }));
      return /snapshot metadata field rng\.seed: expected a decimal integer string \(got "x"\)$/;
    },
  },
  {
    name: "optimizer scalars that are not numbers",
    corrupt: (p) => {
      editMetadata(p, (m) => ({
        ...m,
        optimizer: { ...(m.optimizer as object), scalars: { "0": { step: "one" } } },
      }));
      return /snapshot metadata field optimizer\.scalars\.0\.step: .*expected number/;
    },
  },
  {
    name: "metadata that is not JSON",
    corrupt: (p) => {
      editMetadata(p, () => "{");
      return /snapshot metadata "dtrain" is not valid JSON: /;
    },
  },
  {
    name: "a header that lists a tensor twice",
    corrupt: (p) => {
      const name = duplicateFirstTensor(p);
      return new RegExp(
        `duplicate key "${name.replaceAll(".", "\\.")}": the header names it twice$`,
      );
    },
  },
];

Deno.test("train exits 2 naming the file and the field for a bad snapshot", async (t) => {
  await withTempDir("dtrain_badsnap_", async (dir) => {
    const good = join(dir, "good.safetensors");
    const made = await train([
      ...SMALL_JOB,
      "--epochs",
      "1",
      "--nproc-per-node",
      "1",
      "--snapshot",
      good,
    ]);
    assertSucceeded(made);
    for (const { name, corrupt } of CASES) {
      await t.step(name, async () => {
        const path = join(dir, "bad.safetensors");
        await Deno.copyFile(good, path);
        const expected = corrupt(path);
        // The default 2 processes: the file is checked before the launcher starts anyone.
        const run = await train([...SMALL_JOB, "--epochs", "3", "--snapshot", path], {
          timeoutMs: 30_000,
        });
        assert.equal(run.code, 2, `exit ${run.code}: ${run.stderr}`);
        assert.deepEqual(run.leftovers, []);
        assert.equal(run.stdout, "");
        const lines = run.stderr.trimEnd().split("\n");
        assert.equal(lines.length, 1, `one message, no stack trace: ${run.stderr}`);
        assert.ok(lines[0].startsWith(`train: ${path}: `), lines[0]);
        assert.match(lines[0], expected);
      });
    }
  });
});
