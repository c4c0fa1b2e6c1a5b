// A disk that fills up during a snapshot save: the job ends with one line naming the snapshot,
// no stack trace, and the previous snapshot byte for byte as it was, with no temporary file left.
// The disk is a small tmpfs this test mounts (root only).
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { assertSucceeded, SMALL_JOB, train } from "./_train.ts";

/** Mounting a tmpfs needs root (CAP_SYS_ADMIN). */
const ignore = Deno.uid() !== 0;

/** A job whose snapshot (about 360 KB) is much larger than its report (about 60 KB). */
const JOB = [...SMALL_JOB, "--hidden", "2048", "--lr", "0.001", "--nproc-per-node", "1"];

async function run(cmd: string, ...args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stderr: "piped", stdout: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.ok(out.success, `${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  return text;
}

/** Bytes free on the file system holding `path`. */
async function available(path: string): Promise<number> {
  const lines = (await run("df", "-B1", "--output=avail", path)).trim().split("\n");
  return Number(lines[lines.length - 1]);
}

/** Every file under `path` with its bytes. */
async function files(path: string): Promise<Record<string, Uint8Array>> {
  const out: Record<string, Uint8Array> = {};
  for (const line of (await run("find", path, "-type", "f")).trim().split("\n")) {
    out[line] = await Deno.readFile(line);
  }
  return out;
}

const modes = [
  { name: "a DDP snapshot file", flags: [], snapshot: "snap.safetensors" },
  { name: "an FSDP sharded snapshot", flags: ["--strategy", "fsdp"], snapshot: "snap" },
];

for (const mode of modes) {
  Deno.test({
    name:
      `train on a disk that fills during a save of ${mode.name} says so in one line naming the file`,
    ignore,
    fn: async () => {
      await withTempDir("dtrain_diskfull_", async (dir) => {
        const disk = join(dir, "disk");
        await Deno.mkdir(disk);
        await run("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", disk);
        try {
          const snapshot = join(disk, mode.snapshot);
          const job = [...JOB, ...mode.flags, "--snapshot", snapshot];
          assertSucceeded(await train([...job, "--epochs", "1"]));
          const before = await files(snapshot);
          const size = Object.values(before).reduce((n, b) => n + b.length, 0);
          // Room for the report and the metrics of the next epoch, not for a second snapshot.
          const room = 160 * 1024;
          await Deno.writeFile(join(disk, "filler"), new Uint8Array(await available(disk) - room));
          assert.ok(await available(disk) < size, "the disk cannot hold another snapshot");
          const names = () => [...Deno.readDirSync(disk)].map((e) => e.name).sort();
          const there = names();

          const full = await train([...job, "--epochs", "2"]);
          assert.notEqual(full.code, 0, full.stdout);
          assert.deepEqual(full.leftovers, []);
          assert.equal(
            full.stderr.trimEnd(),
            `train: ${snapshot}: could not be written (No space left on device (os error 28)); ` +
              "the previous snapshot there, if any, is intact",
          );
          assert.deepEqual(await files(snapshot), before, "the previous snapshot is intact");
          assert.deepEqual(names(), there, "no temporary file is left");
        } finally {
          await run("umount", disk);
        }
      });
    },
  });
}
