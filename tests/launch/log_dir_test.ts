// Without --log-dir the launcher's per-rank logs go to a temporary folder that is removed when the
// job succeeds (a folder per run piled up in the temp dir) and kept, named, when it fails.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";

const LAUNCHER = `${ROOT}src/launch/main.ts`;
const WORKER = fileURLToPath(new URL("./workers/worker.ts", import.meta.url));

/** The folder the launcher's first line names. */
function logFolder(stderr: string): string {
  const m =
    /^launch: per-rank logs in (\S+) \(removed if the job succeeds; --log-dir DIR keeps them\)$/m
      .exec(stderr);
  assert.ok(m, stderr);
  return m[1];
}

Deno.test("the launcher's temporary log folder is removed after a success and kept after a failure", async () => {
  await withTempDir("dtrain_log_dir_", async (tmp) => {
    const launch = (...args: string[]) =>
      runDeno({
        args: [LAUNCHER, "--nproc-per-node", "2", WORKER, ...args],
        env: { TMPDIR: tmp },
        timeoutMs: 60_000,
      });
    const ok = await launch("env");
    assert.equal(ok.code, 0, ok.stderr);
    assert.ok(logFolder(ok.stderr).startsWith(tmp), ok.stderr);
    assert.deepEqual([...Deno.readDirSync(tmp)], [], "the successful job's logs were left behind");

    const failed = await launch("fail", "1");
    assert.equal(failed.code, 1, failed.stderr);
    const kept = logFolder(failed.stderr);
    assert.ok(existsSync(`${kept}/rank_1.log`), `${kept} was not kept`);
    assert.ok(failed.stderr.includes(`last lines of ${kept}/rank_1.log`), failed.stderr);
  });
});
