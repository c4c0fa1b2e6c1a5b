/**
 * The job's files against another local user (`nobody`, a real second user: the tests run as root
 * and plant links through `setpriv`): a log folder, a run folder or a file in a shared folder (as
 * /tmp) that `nobody` prepared, with links to files of root's, is refused naming its path, owner
 * and mode, or replaced without being followed; no file of root's is ever touched (see [Note: no
 * writes through planted links] in src/io/private_files.ts).
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeLedgerFile } from "../../src/distributed/ledger_files.ts";
import {
  openAppend,
  ownFolder,
  UnsafePathError,
  writeTextFileAtomic,
} from "../../src/io/private_files.ts";
import { describe, ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { assertSucceeded, SMALL_JOB, train } from "../train/_train.ts";

const NOBODY = 65534;
const isRoot = Deno.uid() === 0;
const WORKER = fileURLToPath(new URL("../launch/workers/worker.ts", import.meta.url));

/** Runs `command` as `nobody`, as a stranger on the machine would. */
async function asNobody(...command: string[]): Promise<void> {
  const out = await new Deno.Command("setpriv", {
    args: [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", ...command],
  }).output();
  assert.ok(out.success, `${command.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
}

/**
 * A test folder `nobody` can reach, holding `shared` (root's, mode 1777, as /tmp) and root's own
 * files in `root/` (mode 0700), which nothing may touch.
 */
async function withSharedTmp(
  fn: (shared: string, victims: Victims) => Promise<void> | void,
): Promise<void> {
  await withTempDir("dtrain_planted_", async (dir) => {
    await Deno.chmod(dir, 0o755);
    const shared = join(dir, "shared");
    await Deno.mkdir(shared);
    await Deno.chmod(shared, 0o1777);
    await Deno.mkdir(join(dir, "root"), { mode: 0o700 });
    const victims = new Victims(join(dir, "root"));
    await fn(shared, victims);
    victims.assertUntouched();
  });
}

/** Files of root's that a link may point to, with their contents. */
class Victims {
  readonly #files = new Map<string, string>();
  constructor(readonly dir: string) {}

  /** A new file of root's (mode 0600). */
  make(name: string): string {
    const path = join(this.dir, name);
    const text = `${name}: root's own, not to be written by the job\n`;
    Deno.writeTextFileSync(path, text, { mode: 0o600 });
    this.#files.set(path, text);
    return path;
  }

  assertUntouched(): void {
    for (const [path, text] of this.#files) {
      assert.equal(Deno.readTextFileSync(path), text, `${path} was written through a link`);
    }
  }
}

function launch(logDir: string) {
  return runDeno({
    timeoutMs: 30_000,
    args: [
      `${ROOT}src/launch/main.ts`,
      ...["--nproc-per-node", "2", "--master-port", String(freePort())],
      ...["--log-dir", logDir, WORKER, "env"],
    ],
  });
}

Deno.test({
  name: "the launcher refuses a log folder another user made or may write to, naming its owner " +
    "and mode, and a planted log link, writing nothing through them",
  ignore: !isRoot,
  fn: () =>
    withSharedTmp(async (shared, victims) => {
      const refused = async (logDir: string, message: RegExp) => {
        const run = await launch(logDir);
        assert.notEqual(run.code, 0, run.stderr);
        assert.match(run.stderr, message);
        assert.deepEqual(run.leftovers, [], `left behind: ${describe(run.leftovers)}`);
        assert.doesNotMatch(run.stdout, /\[rank \d\]/, "no worker started");
        victims.assertUntouched();
      };

      // The finding: `logs/` beside a snapshot in /tmp, made by nobody, its rank_0.log a link.
      const theirs = join(shared, "logs");
      await asNobody("mkdir", "-m", "0755", theirs);
      await asNobody("ln", "-s", victims.make("first"), join(theirs, "rank_0.log"));
      await refused(
        theirs,
        new RegExp(
          `refusing the log folder ${theirs}: it belongs to uid ${NOBODY}, not to this user ` +
            `\\(uid 0\\); mode 0755; remove it, or give --log-dir a folder of your own`,
        ),
      );

      // Root's, but anyone may write to it and replace what is in it.
      const open = join(shared, "open");
      await Deno.mkdir(open);
      await Deno.chmod(open, 0o777);
      await asNobody("ln", "-s", victims.make("second"), join(open, "rank_0.log"));
      await refused(
        open,
        new RegExp(
          `refusing the log folder ${open}: others can write to it \\(mode 0777, owner uid 0\\), ` +
            "without the sticky bit",
        ),
      );

      // A folder of ours inside one of theirs, which they may swap for another.
      const inside = join(shared, "above", "logs");
      await asNobody("mkdir", "-m", "0755", join(shared, "above"));
      await Deno.mkdir(inside);
      await refused(
        inside,
        new RegExp(
          `refusing the log folder ${inside}: the folder ${shared}/above above it belongs to uid ` +
            `${NOBODY}, who could replace it \\(mode 0755\\)`,
        ),
      );

      // A log folder shared as /tmp is: nobody may plant links in it, which are not followed.
      await asNobody("ln", "-s", victims.make("third"), join(shared, "rank_1.log"));
      await refused(
        shared,
        new RegExp(
          `refusing the log file ${shared}/rank_1\\.log: it is a symbolic link ` +
            `\\(mode 0777, owner uid ${NOBODY}\\), which may lead to anyone's file; remove it`,
        ),
      );
    }),
});

Deno.test({
  name: "train in a shared folder replaces a planted metrics.jsonl or report.html link, refuses " +
    "one found on resume and a run folder of another user's, touching no file of root's",
  ignore: !isRoot,
  fn: () =>
    withSharedTmp(async (shared, victims) => {
      const snapshot = join(shared, "snap.safetensors");
      const job = [...SMALL_JOB, "--snapshot", snapshot];
      const metrics = join(shared, "metrics.jsonl"), report = join(shared, "report.html");
      await asNobody("ln", "-s", victims.make("metrics"), metrics);
      await asNobody("ln", "-s", victims.make("report"), report);
      assertSucceeded(await train([...job, "--epochs", "1"]));
      victims.assertUntouched();
      for (const file of [metrics, report]) {
        const info = Deno.lstatSync(file);
        assert.ok(info.isFile && info.uid === 0, `${file} is the job's own file`);
      }
      assert.match(Deno.readTextFileSync(metrics), /"kind":"epoch"/);

      // The finding: on resume the run rewrote the file metrics.jsonl led to.
      Deno.removeSync(metrics);
      await asNobody("ln", "-s", victims.make("resumed"), metrics);
      const resumed = await train([...job, "--epochs", "2"]);
      assert.notEqual(resumed.code, 0, resumed.stderr);
      assert.match(
        resumed.stderr,
        new RegExp(
          `\\[rank 0\\] train: refusing the run record ${metrics}: it is a symbolic link ` +
            `\\(mode 0777, owner uid ${NOBODY}\\), which may lead to anyone's file; remove it`,
        ),
      );

      // A run folder of nobody's: its logs/ are refused before any process starts, and a single
      // process refuses the folder.
      const theirs = join(shared, "theirs");
      await asNobody("mkdir", "-m", "0755", theirs);
      const there = [...SMALL_JOB, "--snapshot", join(theirs, "snap.safetensors")];
      const launched = await train(there);
      assert.equal(launched.code, 1, launched.stderr);
      assert.match(
        launched.stderr,
        new RegExp(
          `^train: refusing the log folder ${theirs}/logs: the folder ${theirs} above it belongs ` +
            `to uid ${NOBODY}, who could replace it \\(mode 0755\\); remove it, or give --log-dir`,
        ),
      );
      const single = await train([...there, "--nproc-per-node", "1"]);
      assert.equal(single.code, 2, single.stderr);
      assert.match(
        single.stderr,
        new RegExp(
          `train: refusing the run folder ${theirs}: it belongs to uid ${NOBODY}, not to this ` +
            `user \\(uid 0\\); mode 0755; remove it, or give --snapshot a path in a folder of your own`,
        ),
      );
      assert.deepEqual([...Deno.readDirSync(theirs)], [], "nothing written there");
    }),
});

Deno.test({
  name: "an FSDP snapshot folder another user made is refused on every rank, nothing written in it",
  ignore: !isRoot,
  fn: () =>
    withSharedTmp(async (shared) => {
      const theirs = join(shared, "snap");
      await asNobody("mkdir", "-m", "0755", theirs);
      const run = await train([...SMALL_JOB, "--strategy", "fsdp", "--snapshot", theirs]);
      assert.notEqual(run.code, 0, run.stderr);
      assert.match(
        run.stderr,
        new RegExp(
          `train: refusing the snapshot folder ${theirs}: it belongs to uid ${NOBODY}, not to ` +
            `this user \\(uid 0\\); mode 0755; remove it, or give --snapshot a path`,
        ),
      );
      assert.deepEqual([...Deno.readDirSync(theirs)], [], "nothing written there");
    }),
});

Deno.test({
  name: "a rank's ledger, and any file written whole, replaces a planted link and its temporary",
  ignore: !isRoot,
  fn: () =>
    withSharedTmp(async (shared, victims) => {
      const ledger = join(shared, "rank_0.ledger.json");
      await asNobody("ln", "-s", victims.make("ledger"), ledger);
      await asNobody("ln", "-s", victims.make("ledger.tmp"), `${ledger}.tmp`);
      Deno.env.set("DTRAIN_LEDGER_DIR", shared);
      try {
        writeLedgerFile(0, "request");
      } finally {
        Deno.env.delete("DTRAIN_LEDGER_DIR");
      }
      assert.ok(Deno.lstatSync(ledger).isFile);
      assert.equal(JSON.parse(Deno.readTextFileSync(ledger)).why, "request");

      const trace = join(shared, "trace.json");
      await asNobody("ln", "-s", victims.make("trace"), trace);
      writeTextFileAtomic(trace, "{}");
      assert.equal(Deno.readTextFileSync(trace), "{}");
    }),
});

Deno.test({
  name: "openAppend refuses a link, another user's file, a second name of a file and a FIFO, " +
    "naming the path, owner and mode",
  ignore: !isRoot,
  fn: () =>
    withSharedTmp(async (shared, victims) => {
      const refused = (name: string, problem: RegExp) => {
        const path = join(shared, name);
        assert.throws(() => openAppend(path, "log file"), (error: Error) => {
          assert.ok(error instanceof UnsafePathError);
          assert.equal(error.path, path);
          assert.match(error.message, new RegExp(`^refusing the log file ${path}: `));
          assert.match(error.message, problem);
          return true;
        });
      };
      await asNobody("ln", "-s", victims.make("linked"), join(shared, "link.log"));
      refused("link.log", /it is a symbolic link \(mode 0777, owner uid 65534\)/);
      await asNobody("touch", join(shared, "theirs.log"));
      refused("theirs.log", /it belongs to uid 65534, not to this user \(uid 0\); mode 0644/);
      const mine = victims.make("hardlinked");
      Deno.linkSync(mine, join(shared, "second.log"));
      refused(
        "second.log",
        /it has 2 names \(hard links\), and another may be anyone's file \(mode 0600, owner uid 0\)/,
      );
      await asNobody("mkfifo", "-m", "0600", join(shared, "fifo.log"));
      refused("fifo.log", /it is a FIFO, not a regular file \(mode 0600, owner uid 65534\)/);

      // A file of the job's own is appended to.
      for (const line of ["a\n", "b\n"]) {
        using log = openAppend(join(shared, "mine.log"), "log file");
        log.writeSync(new TextEncoder().encode(line));
      }
      assert.equal(Deno.readTextFileSync(join(shared, "mine.log")), "a\nb\n");
    }),
});

Deno.test({
  name:
    "ownFolder takes a shared sticky folder of root's for a run folder, but not for a private one",
  ignore: !isRoot,
  fn: () =>
    withSharedTmp((shared) => {
      const rules = { what: "run folder", fix: "use another" };
      ownFolder(shared, { ...rules, shared: true });
      assert.throws(
        () => ownFolder(shared, rules),
        new RegExp(
          `refusing the run folder ${shared}: others can write to it \\(mode 01777, owner uid 0\\); \`chmod go-w\` it, or use another`,
        ),
      );
      // Created private enough to pass, whatever the umask.
      const made = join(shared, "made", "run");
      const umask = Deno.umask(0o002);
      try {
        ownFolder(made, rules);
      } finally {
        Deno.umask(umask);
      }
      assert.equal(Deno.statSync(made).mode! & 0o777, 0o755);
    }),
});
