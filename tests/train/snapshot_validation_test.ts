// Snapshot files are untrusted input: bad metadata or a bad header makes `train` exit 2 with one
// message naming the file and the field, never a stack trace, never exit 0 on garbage.
import assert from "node:assert/strict";
import { join } from "node:path";
import { load, save } from "../../src/checkpoint/mod.ts";
import { tensor } from "../../src/tensor/creation.ts";
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

/** A bad value for each optimizer field a snapshot holds, the way a file would carry it. */
const BAD_OPTIMIZER_FIELDS: { field: string; value: unknown; expected: string }[] = [
  { field: "lr", value: -5, expected: "Too small.* \\(got -5\\)" },
  { field: "lr", value: "abc", expected: 'Invalid input: expected number.* \\(got "abc"\\)' },
  {
    field: "momentum",
    value: 1e308,
    expected: "Too big: expected number to be <1 \\(got 1e\\+308\\)",
  },
  { field: "momentum", value: -0.5, expected: "Too small.* \\(got -0\\.5\\)" },
  { field: "weightDecay", value: -1, expected: "Too small.* \\(got -1\\)" },
  { field: "eps", value: 0, expected: "Too small: expected number to be >0 \\(got 0\\)" },
  { field: "betas", value: [0.9, 1], expected: "Too big.* \\(got 1\\)" },
];

function optimizerCases(): Case[] {
  const groups = BAD_OPTIMIZER_FIELDS.map(({ field, value, expected }): Case => ({
    name: `optimizer ${field} ${JSON.stringify(value)}`,
    corrupt: (p) => {
      editMetadata(p, (m) => {
        const optimizer = m.optimizer as { paramGroups: Record<string, unknown>[] };
        optimizer.paramGroups[0][field] = value;
        return m;
      });
      const at = field === "betas" ? "betas\\.1" : field;
      return new RegExp(
        `snapshot metadata field optimizer\\.paramGroups\\.0\\.${at}: ${expected}$`,
      );
    },
  }));
  const step: Case = {
    name: "an optimizer step count below 0",
    corrupt: (p) => {
      editMetadata(p, (m) => ({
        ...m,
        optimizer: { ...(m.optimizer as object), scalars: { "0": { step: -1 } } },
      }));
      return /snapshot metadata field optimizer\.scalars\.0\.step: Too small.* \(got -1\)$/;
    },
  };
  return [...groups, step];
}

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
  ...optimizerCases(),
  {
    name: "a sampler position beyond the data",
    corrupt: (p) => {
      editMetadata(p, (m) => ({ ...m, sampler: { ...(m.sampler as object), position: 1e12 } }));
      return /snapshot metadata field sampler\.position: 1000000000000 samples of the epoch consumed, but an epoch of this data set has 2048$/;
    },
  },
  {
    name: "a sampler position that is not an integer",
    corrupt: (p) => {
      editMetadata(p, (m) => ({ ...m, sampler: { ...(m.sampler as object), position: 2.5 } }));
      return /snapshot metadata field sampler\.position: .*expected int.* \(got 2\.5\)$/;
    },
  },
  {
    name: "a sampler epoch past the epochs run",
    corrupt: (p) => {
      editMetadata(p, (m) => ({ ...m, sampler: { ...(m.sampler as object), epoch: 7 } }));
      return /snapshot metadata field sampler\.epoch: the sampler is at epoch 7, past the 1 epochs run/;
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

/** Rewrites a sharded snapshot's index.json with `edit`. */
function editIndex(dir: string, edit: (index: Record<string, unknown>) => void): void {
  const path = join(dir, "index.json");
  const index = JSON.parse(Deno.readTextFileSync(path));
  edit(index);
  Deno.writeTextFileSync(path, JSON.stringify(index));
}

type IndexCase = { name: string; edit: (index: Record<string, unknown>) => void; expected: RegExp };

const INDEX_CASES: IndexCase[] = [
  ...BAD_OPTIMIZER_FIELDS.filter((c) => !["eps", "betas"].includes(c.field)).map((c) => ({
    name: `optimizer ${c.field} ${JSON.stringify(c.value)}`,
    edit: (index: Record<string, unknown>) => {
      (index.paramGroups as Record<string, unknown>[])[0][c.field] = c.value;
    },
    expected: new RegExp(`: paramGroups\\.0\\.${c.field}: ${c.expected}$`),
  })),
  {
    name: "an optimizer step count that is not an integer",
    edit: (index) => (index.scalars = { "0.weight": { step: 1.5 } }),
    expected: /: scalars\.0\.weight\.step: .*expected int.* \(got 1\.5\)$/,
  },
  {
    name: "a sampler position beyond the data",
    edit: (index) => {
      const extra = index.extra as { sampler: Record<string, unknown> };
      extra.sampler.position = 1e12;
    },
    expected:
      /: snapshot metadata field sampler\.position: 1000000000000 samples of the epoch consumed, but an epoch of this data set has 2048$/,
  },
  {
    name: "a negative sampler epoch",
    edit: (index) => {
      (index.extra as { sampler: Record<string, unknown> }).sampler.epoch = -1;
    },
    expected: /: snapshot metadata field sampler\.epoch: Too small.* \(got -1\)$/,
  },
];

Deno.test("train --strategy fsdp exits 2 naming the index and the field for bad optimizer or sampler state", async (t) => {
  await withTempDir("dtrain_badshards_", async (dir) => {
    const good = join(dir, "good");
    const job = [...SMALL_JOB, "--strategy", "fsdp", "--momentum", "0.9"];
    const made = await train([
      ...job,
      "--epochs",
      "1",
      "--nproc-per-node",
      "1",
      "--snapshot",
      good,
    ]);
    assertSucceeded(made);
    for (const { name, edit, expected } of INDEX_CASES) {
      await t.step(name, async () => {
        const path = join(dir, "bad");
        await Deno.remove(path, { recursive: true }).catch(() => {});
        await new Deno.Command("cp", { args: ["-r", good, path] }).output();
        editIndex(path, edit);
        // The default 2 processes: the index is checked before the launcher starts anyone.
        const run = await train([...job, "--epochs", "3", "--snapshot", path], {
          timeoutMs: 30_000,
        });
        assert.equal(run.code, 2, `exit ${run.code}: ${run.stderr}`);
        assert.deepEqual(run.leftovers, []);
        assert.equal(run.stdout, "");
        const lines = run.stderr.trimEnd().split("\n");
        assert.equal(lines.length, 1, `one message, no stack trace: ${run.stderr}`);
        assert.ok(lines[0].startsWith(`train: ${join(path, "index.json")}: `), lines[0]);
        assert.match(lines[0], expected);
      });
    }
  });
});

Deno.test("train exits 2 naming the file and the tensor for a snapshot holding NaN or infinity", async (t) => {
  await withTempDir("dtrain_nansnap_", async (dir) => {
    const good = join(dir, "good.safetensors");
    const job = [...SMALL_JOB, "--nproc-per-node", "1"];
    assertSucceeded(await train([...job, "--epochs", "1", "--snapshot", good]));
    const cases = [
      {
        name: "optimizer.0.momentumBuffer",
        value: NaN,
        what: "the optimizer's momentumBuffer of parameter 0.weight",
      },
      { name: "model.2.bias", value: -Infinity, what: "parameter 2.bias" },
    ];
    for (const { name, value, what } of cases) {
      await t.step(`${value} in ${name}`, async () => {
        const path = join(dir, "bad.safetensors");
        const { tensors, metadata } = load(good);
        try {
          const values = tensors[name].toArray() as Float32Array;
          values[values.length - 1] = value;
          tensors[name].dispose();
          tensors[name] = tensor(values, tensors[name].shape);
          save(path, tensors, metadata);
        } finally {
          for (const v of Object.values(tensors)) v.dispose();
        }
        const run = await train([...job, "--epochs", "3", "--snapshot", path], {
          timeoutMs: 30_000,
        });
        assert.equal(run.code, 2, `exit ${run.code}: ${run.stderr}`);
        assert.deepEqual(run.leftovers, []);
        assert.equal(run.stderr, `train: ${path}: ${what} holds NaN or infinity\n`);
      });
    }
  });
});
