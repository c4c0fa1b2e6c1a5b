// A new device family is the files docs/contributing.md lists under "Adding a device": this test
// adds a throwaway one, "toy", to a copy of the tree by writing its device file and its record in
// family.ts, nothing else, then type-checks the copy and runs a probe there that meets the family
// in every layer that knows families: a tensor and an op, autocast, the train job's `--device`
// (schema, help, checks, the process's device and group), the DataLoader's pinning, a device mesh
// and an all-reduce over the communicator its record names. The toy reuses the cpu's kernels (a
// real family adds csrc/NAME/ and its Makefile rule, which no TypeScript reads) but calls its
// memory its own, so every layer copies in and out of it as it would for a GPU.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** src/tensor/device/toy.ts: the cpu's allocator and kernels under the toy's name. */
const TOY_DEVICE = `/** A throwaway family: the cpu's memory and kernels, called its own. @module */

import { createCpuDevice } from "./cpu.ts";
import type { DeviceBackend } from "./device.ts";

/** Makes the device \`toy:index\`. */
export function createToyDevice(index: number): DeviceBackend {
  const cpu = createCpuDevice();
  return {
    ...cpu,
    name: \`toy:\${index}\`,
    isHostMemory: false,
    allocatedBytes: () => 0, // its blocks come from the cpu's allocator, which counts them
    copyIn: (dst, src, nbytes) => cpu.copy(dst, src, nbytes),
    copyOut: (dst, src, nbytes) => cpu.copy(dst, src, nbytes),
    copyInAsync: (copies) => cpu.copyInAsync(copies),
  };
}
`;

/** The toy's record, as family.ts's records are written. */
const TOY_RECORD = `  toy: {
    create: createToyDevice,
    single: false,
    hostMemory: false,
    // Host memory underneath, so Gloo's pointers reach it.
    communicator: "gloo",
    autocastDtype: "bf16",
    pinsBatches: true,
    title: "the toy accelerator",
    unit: "toy device",
    summary: "a throwaway family",
    isAvailable: () => true,
    unavailableReason: () => "",
    deviceCount: () => 2,
  },
`;

/** The probe, run in the copy: every use of the family, asserted. */
const PROBE = `import assert from "node:assert/strict";
import { autocast, dist, getAutocastDtype, isAutocastEnabled, tensor } from "./tree/mod.ts";
import { DataLoader, TensorDataset } from "./tree/src/data/mod.ts";
import { BACKENDS } from "./tree/src/distributed/backends.ts";
import { parseTrainArgs } from "./tree/src/train/config.ts";
import { deviceProblem, groupBackend, processDevice } from "./tree/src/train/devices.ts";
import { USAGE } from "./tree/src/train/usage.ts";

const a = tensor([1, 2, 3, 4], [2, 2], { device: "toy:1" });
assert.equal(a.device, "toy:1");
assert.deepEqual(Array.from(a.add(a).toArray()), [2, 4, 6, 8]);
assert.equal(tensor([1], [1], { device: "toy" }).device, "toy:0");

assert.equal(getAutocastDtype("toy"), "bf16");
assert.equal(isAutocastEnabled("toy"), false);
const product = autocast({ deviceType: "toy" }, () => a.matmul(a));
assert.equal(product.dtype, "bf16");
assert.deepEqual(Array.from(product.to("f32").toArray()), [7, 10, 15, 22]);

const config = parseTrainArgs(["--device", "toy"]);
assert.ok(config !== "help" && config.device === "toy");
assert.throws(() => parseTrainArgs(["--device", "tpu"]), /device/);
assert.match(USAGE, /--device cpu\\|cuda\\|emu\\|toy /);
assert.match(USAGE, / toy: a throwaway family\\n/);
assert.equal(deviceProblem("toy", 2), null);
assert.equal(
  deviceProblem("toy", 3),
  "--device toy runs one process per toy device, but --nproc-per-node is 3 and this machine " +
    "has 2 toy devices",
);
assert.equal(processDevice("toy"), "toy:1"); // LOCAL_RANK=1
assert.equal(groupBackend("toy"), "auto");

const samples = tensor(Float32Array.from({ length: 8 }, (_, i) => i), [4, 2]);
const labels = tensor([0, 1, 0, 1], [4], { dtype: "i32" });
const data = new TensorDataset(samples, labels);
const batches = [...new DataLoader(data, { batchSize: 2, pinMemory: true, device: "toy:1" })];
const devices = batches.map(([x, y]) => [x.device, y.device]);
assert.deepEqual(devices, [["toy:1", "toy:1"], ["toy:1", "toy:1"]]);
assert.deepEqual(Array.from(batches[1][0].toArray()), [4, 5, 6, 7]);

assert.ok(BACKENDS.gloo.reaches.includes("toy"), "the row the record names reaches its memory");
assert.ok(BACKENDS.auto.reaches.includes("toy"));
assert.ok(!BACKENDS.nccl.reaches.includes("toy"));

const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
const port = listener.addr.port;
listener.close();
const group = await dist.initProcessGroup({
  backend: "auto",
  initMethod: \`tcp://127.0.0.1:\${port}\`,
  rank: 0,
  worldSize: 1,
  timeoutMs: 10000,
});
try {
  assert.equal(group.reaches("toy:1"), true);
  const mesh = await dist.initDeviceMesh("toy", [1]);
  assert.equal(mesh.deviceType, "toy");
  const x = tensor([1, 2, 3], [3], { device: "toy:1" });
  await group.allReduce(x, "sum");
  assert.deepEqual(Array.from(x.toArray()), [1, 2, 3]);
} finally {
  await dist.destroyProcessGroup();
}
console.log("toy family ok");
`;

/** Every file under `dir`, relative to it. */
function files(dir: string, prefix = ""): string[] {
  return [...Deno.readDirSync(`${dir}${prefix}`)].flatMap((entry) => {
    const path = `${prefix}${entry.name}`;
    if (entry.isDirectory) return files(dir, `${path}/`);
    return entry.isFile ? [path] : [];
  });
}

/** Copies what dtrain's TypeScript loads into `tree`, the native build linked, not copied. */
function copyTree(tree: string): void {
  for (const part of ["src", "ffi"]) {
    for (const file of files(`${ROOT}${part}/`)) {
      Deno.mkdirSync(`${tree}${part}/${file}`.replace(/[^/]*$/, ""), { recursive: true });
      Deno.copyFileSync(`${ROOT}${part}/${file}`, `${tree}${part}/${file}`);
    }
  }
  for (const file of ["mod.ts", "deno.json", "deno.lock"]) {
    Deno.copyFileSync(`${ROOT}${file}`, `${tree}${file}`);
  }
  Deno.symlinkSync(`${ROOT}build`, `${tree}build`);
}

/** Adds the toy family to `tree` as contributing says; returns the files written. */
function addToyFamily(tree: string): string[] {
  Deno.writeTextFileSync(`${tree}src/tensor/device/toy.ts`, TOY_DEVICE);
  const path = `${tree}src/tensor/device/family.ts`;
  const text = Deno.readTextFileSync(path);
  const lastImport = text.lastIndexOf("\nimport ");
  const afterImports = text.indexOf("\n", lastImport + 1) + 1;
  const end = text.indexOf("} as const satisfies Record<string, FamilyRecord>;");
  assert.ok(lastImport > 0 && end > afterImports, "family.ts's imports and FAMILIES' end");
  Deno.writeTextFileSync(
    path,
    text.slice(0, afterImports) + 'import { createToyDevice } from "./toy.ts";\n' +
      text.slice(afterImports, end) + TOY_RECORD + text.slice(end),
  );
  return ["src/tensor/device/toy.ts", "src/tensor/device/family.ts"];
}

/** The files of `tree` that differ from the repository's (or that it lacks). */
function changed(tree: string): string[] {
  const differs = (file: string) => {
    try {
      return Deno.readTextFileSync(`${ROOT}${file}`) !== Deno.readTextFileSync(`${tree}${file}`);
    } catch {
      return true;
    }
  };
  return ["src", "ffi"].flatMap((part) => files(`${tree}${part}/`).map((f) => `${part}/${f}`))
    .filter(differs).sort();
}

/** Runs `deno args...` in `cwd`; throws with its output unless it succeeds. */
async function deno(cwd: string, env: Record<string, string>, ...args: string[]): Promise<string> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
  assert.equal(code, 0, `deno ${args.join(" ")} failed:\n${text}`);
  return text;
}

/** The paths that contributing's "Adding a device" section numbers as steps, NAME as `name`. */
function contributingSteps(name: string): string[] {
  const text = Deno.readTextFileSync(`${ROOT}docs/contributing.md`);
  const section = /^## Adding a device\b[^\n]*\n([\s\S]*?)^## /m.exec(text);
  assert.ok(section, 'docs/contributing.md has an "Adding a device" section');
  return [...section[1].matchAll(/^\d+\. `([^`]+)`/gm)].map((m) => m[1].replaceAll("NAME", name));
}

Deno.test("a throwaway family, its device file and record alone, works in every layer", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain_family_" });
  const tree = `${dir}/tree/`;
  try {
    copyTree(tree);
    const written = addToyFamily(tree);
    assert.deepEqual(changed(tree), [...written].sort(), "only the family's files differ");
    const steps = contributingSteps("toy");
    for (const file of written) {
      assert.ok(steps.includes(file), `contributing's steps name ${file} (${steps.join(", ")})`);
    }
    Deno.writeTextFileSync(`${dir}/probe.ts`, PROBE);
    const config = ["--config", `${tree}deno.json`];
    // The types derive from the records: the copy checks with the new name in every union.
    await deno(dir, {}, "check", ...config, "probe.ts", "tree/mod.ts", "tree/src/train/main.ts");
    const out = await deno(dir, { LOCAL_RANK: "1" }, "run", "-A", ...config, "probe.ts");
    assert.match(out, /toy family ok/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("contributing's device steps are the family's files, and each exists for cuda", () => {
  const steps = contributingSteps("cuda");
  assert.deepEqual(steps, [
    "src/tensor/device/cuda.ts",
    "src/tensor/device/family.ts",
    "csrc/cuda/",
  ]);
  for (const path of steps) Deno.statSync(`${ROOT}${path}`);
  const heading = /^## Adding a device \(([a-z]+) files/m.exec(
    Deno.readTextFileSync(`${ROOT}docs/contributing.md`),
  );
  const words = ["zero", "one", "two", "three", "four", "five"];
  assert.equal(heading?.[1], words[steps.filter((s) => s.endsWith(".ts")).length]);
});
