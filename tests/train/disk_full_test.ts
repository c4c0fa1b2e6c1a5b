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

Deno.test({
  name: "train on a disk that fills during a snapshot save says so in one line naming the file",
  ignore,
  fn: async () => {
    await withTempDir("dtrain_diskfull_", async (dir) => {
      const disk = join(dir, "disk");
      await Deno.mkdir(disk);
      await run("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", disk);
      try {
        const snapshot = join(disk, "snap.safetensors");
        assertSucceeded(await train([...JOB, "--epochs", "1", "--snapshot", snapshot]));
        const before = await Deno.readFile(snapshot);
        // Room for the report and the metrics of the next epoch, not for a second snapshot.
        const room = 160 * 1024;
        await Deno.writeFile(join(disk, "filler"), new Uint8Array(await available(disk) - room));
        assert.ok(await available(disk) < before.length, "the disk cannot hold another snapshot");

        const full = await train([...JOB, "--epochs", "2", "--snapshot", snapshot]);
        assert.notEqual(full.code, 0, full.stdout);
        assert.deepEqual(full.leftovers, []);
        assert.equal(
          full.stderr.trimEnd(),
          `train: ${snapshot}: could not be written (No space left on device (os error 28)); ` +
            "the previous file there, if any, is intact",
        );
        assert.deepEqual(await Deno.readFile(snapshot), before, "the previous snapshot is intact");
        const names = [...Deno.readDirSync(disk)].map((e) => e.name).sort();
        assert.deepEqual(names, ["filler", "metrics.jsonl", "report.html", "snap.safetensors"]);
      } finally {
        await run("umount", disk);
      }
    });
  },
});
