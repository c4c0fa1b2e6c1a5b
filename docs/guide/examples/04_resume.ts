// run: deno run -A --v8-flags=--expose-gc docs/guide/examples/04_resume.ts
// expect: interrupted at step 45 and resumed == uninterrupted: true (4 tensors, bit for bit)
// expect-match: \[rank 0\] resuming from \S+/b/snapshot.safetensors at epoch 1, sample 832 \(world size 2\)
// expect-match: resuming from \S+/c/snapshot.safetensors at epoch 1, sample 832 \(world size 1\)
// expect: resumed on 1 process from a 2-process snapshot: done: 2 epochs
import assert from "node:assert/strict";
import { checkpoint } from "../../../mod.ts";

// A small train job: 2048 synthetic samples, batches of 32 on each of 2 processes (32 steps an
// epoch), 2 epochs, a snapshot at the end of every epoch and every 5 steps.
const JOB = ["--dataset", "synthetic", "--model", "mlp", "--hidden", "16", "--batch-size", "32"];
const dir = await Deno.makeTempDir({ prefix: "guide_resume_" });

/** Runs `deno task train` with JOB and `args`; returns what it printed. */
async function train(...args: string[]): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    // No --master-port: on one node the job's store takes a free port.
    args: ["run", "-A", "--v8-flags=--expose-gc", "src/train/main.ts", ...JOB, ...args],
    env: { NO_COLOR: "1" },
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.ok(out.success, `train ${args.join(" ")} failed:\n${text}`);
  return text;
}

/** The model's tensors in a snapshot, as raw bytes. */
function weights(path: string): Map<string, Uint8Array> {
  const saved = checkpoint.load(path);
  return new Map(
    Object.entries(saved.tensors)
      .filter(([name]) => name.startsWith("model."))
      .map(([name, t]) => [name, new Uint8Array(t.toArray().buffer)]),
  );
}

const epochs = ["--epochs", "2", "--save-every-steps", "5"];
// 1. Uninterrupted.
await train(...epochs, "--snapshot", `${dir}/a/snapshot.safetensors`);
// 2. Stopped after 45 steps (in the second epoch), then the same command again: it resumes.
const b = `${dir}/b/snapshot.safetensors`;
await train(...epochs, "--snapshot", b, "--max-steps", "45");
const resumed = await train(...epochs, "--snapshot", b);
console.log(resumed.split("\n").find((l) => l.includes("resuming from")));
const [wa, wb] = [weights(`${dir}/a/snapshot.safetensors`), weights(b)];
const same = [...wa].every(([name, bytes]) => {
  const other = wb.get(name);
  return other !== undefined && bytes.every((v, i) => v === other[i]);
});
console.log(
  `interrupted at step 45 and resumed == uninterrupted: ${same} (${wa.size} tensors, bit for bit)`,
);
assert.ok(same);
// 3. Stopped after 45 steps on 2 processes, resumed on 1: the rest of the epoch's samples, once.
const c = `${dir}/c/snapshot.safetensors`;
await train(...epochs, "--snapshot", c, "--max-steps", "45");
const one = await train(...epochs, "--snapshot", c, "--nproc-per-node", "1");
console.log(one.split("\n").find((l) => l.includes("resuming from")));
console.log(
  `resumed on 1 process from a 2-process snapshot: ${
    one.split("\n").find((l) => l.includes("done:"))
  }`,
);
await Deno.remove(dir, { recursive: true });
