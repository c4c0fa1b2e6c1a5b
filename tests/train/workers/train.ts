/**
 * The train job's entry point with fault injection for the train tests: it patches the Trainer
 * (and, for one snapshot, file writes) from the outside, then runs `src/train/main.ts`'s `main`
 * unchanged. Started by the launcher as the worker script, or directly for one process.
 *
 * Environment (each hook is off when its variable is unset):
 * - DTRAIN_TEST_CRASH_RANK, DTRAIN_TEST_CRASH_AT_STEP: in the launcher's first attempt (or
 *   attempt DTRAIN_TEST_CRASH_ATTEMPT), that rank SIGKILLs itself just before its Nth optimizer
 *   step (counted from 0 over the run), after the file DTRAIN_TEST_CRASH_AFTER_FILE exists if set;
 * - DTRAIN_TEST_KILL_IN_SNAPSHOT=N: the Nth snapshot write (from 1) SIGKILLs the process after
 *   half of its second write to the file, leaving the temporary file partly written;
 * - DTRAIN_TEST_CHDIR_RANK, DTRAIN_TEST_CHDIR: that rank works in another folder, so a relative
 *   --snapshot names another file there, as a node-local disk would;
 * - DTRAIN_TEST_STALL_AT=E:P: in the first attempt, once the snapshot at sample P of epoch E
 *   (from 0) is saved, print "stalled at epoch E sample P" and wait forever (as a node that
 *   stopped answering would);
 * - DTRAIN_TEST_SAMPLE_LOG=DIR: every DistributedSampler pass writes the indices it yields to
 *   DIR/a<attempt>_rank<rank>_e<epoch>.json, with its world size and start position.
 *
 * (The job's own DTRAIN_WEIGHTS_DUMP works here too.)
 * @module
 */

import { main } from "../../../src/train/main.ts";
import { Trainer } from "../../../src/train/trainer.ts";
import { DistributedSampler } from "../../../src/data/distributed_sampler.ts";

const env = (name: string) => Deno.env.get(name);
const rank = Number(env("RANK") ?? 0);

function die(): never {
  Deno.kill(Deno.pid, "SIGKILL");
  throw new Error("unreachable: SIGKILL did not end the process");
}

const crashRank = env("DTRAIN_TEST_CRASH_RANK");
const crashAttempt = env("DTRAIN_TEST_CRASH_ATTEMPT") ?? "0";
if (
  crashRank !== undefined && rank === Number(crashRank) &&
  env("DTRAIN_RESTART_COUNT") === crashAttempt
) {
  const crashAt = Number(env("DTRAIN_TEST_CRASH_AT_STEP"));
  const after = env("DTRAIN_TEST_CRASH_AFTER_FILE");
  const runBatch = Trainer.prototype.runBatch;
  let step = 0;
  Trainer.prototype.runBatch = async function (x, y) {
    if (step++ === crashAt) {
      while (after && !await Deno.stat(after).then(() => true, () => false)) {
        await new Promise((r) => setTimeout(r, 20));
      }
      console.error(`rank ${rank}: fault injection: SIGKILL before step ${crashAt}`);
      die();
    }
    return runBatch.call(this, x, y);
  };
}

const chdirRank = env("DTRAIN_TEST_CHDIR_RANK");
if (chdirRank !== undefined && rank === Number(chdirRank)) Deno.chdir(env("DTRAIN_TEST_CHDIR")!);

const killInSnapshot = env("DTRAIN_TEST_KILL_IN_SNAPSHOT");
if (killInSnapshot !== undefined) {
  const saveSnapshot = Trainer.prototype.saveSnapshot;
  let saves = 0;
  Trainer.prototype.saveSnapshot = function (position?: number) {
    if (++saves === Number(killInSnapshot)) {
      const writeSync = Deno.FsFile.prototype.writeSync;
      let writes = 0;
      Deno.FsFile.prototype.writeSync = function (bytes) {
        if (++writes < 2) return writeSync.call(this, bytes);
        writeSync.call(this, bytes.subarray(0, bytes.length >> 1));
        console.error(`fault injection: SIGKILL while writing snapshot ${saves}`);
        die();
      };
    }
    return saveSnapshot.call(this, position);
  };
}

const stallAt = env("DTRAIN_TEST_STALL_AT");
if (stallAt !== undefined && env("DTRAIN_RESTART_COUNT") === "0") {
  const [epoch, sample] = stallAt.split(":").map(Number);
  const saveSnapshot = Trainer.prototype.saveSnapshot;
  Trainer.prototype.saveSnapshot = async function (position?: number) {
    await saveSnapshot.call(this, position);
    if (position === sample && this.epochsRun === epoch) {
      console.log(`stalled at epoch ${epoch} sample ${position}`);
      await new Promise(() => setInterval(() => {}, 1 << 30));
    }
  };
}

const sampleLog = env("DTRAIN_TEST_SAMPLE_LOG");
if (sampleLog !== undefined) {
  const indices = DistributedSampler.prototype.indices;
  DistributedSampler.prototype.indices = function () {
    const mine = indices.call(this);
    const attempt = env("DTRAIN_RESTART_COUNT") ?? "0";
    Deno.writeTextFileSync(
      `${sampleLog}/a${attempt}_rank${rank}_e${this.epoch}.json`,
      JSON.stringify({ world: this.numReplicas, position: this.position, indices: [...mine] }),
    );
    return mine;
  };
}

try {
  Deno.exit(await main(Deno.args));
} catch (error) {
  console.error(`train: ${(error as Error).stack ?? error}`);
  Deno.exit(1);
}
