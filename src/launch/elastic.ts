/**
 * Elastic jobs (`--nnodes MIN:MAX`, as torchrun's): the launchers of the nodes that are up meet in
 * rounds in the store; each round fixes the nodes, their order and so the world size, and runs
 * every node's workers under the round's own key prefix (DTRAIN_RESTART_COUNT, the round). When
 * any node's group fails (a lost node makes its peers' collectives fail), every launcher stops its
 * workers and the survivors meet in the next round; the job resumes from its last snapshot at the
 * new world size. A node that arrives while a round with room runs is admitted at the next one:
 * the round's launchers see it waiting (torchrun's `num_nodes_waiting`), ask their workers to
 * stop at a step boundary (stop_request.ts), and the train job saves a snapshot there, so the next
 * round resumes the data where it was. Failed rounds are counted per job, in the store, so
 * `--max-restarts` bounds the job's restarts whatever each node saw; rounds that admit a node
 * are not restarts (as in torchrun).
 *
 * [Note: elastic rendezvous]
 * Keys, under `elastic/`:
 *   nnodes           the job's MIN:MAX, set by its first node; a node with another exits 2
 *   round            the round being formed or run (decimal; advanced once per failed or
 *                    stopped round by a compare-and-set from r to r + 1, so that every node of
 *                    the round advancing it advances it once)
 *   r<R>/joined      a counter: a launcher's slot in round R is its count minus 1
 *   r<R>/closed      the number of nodes of round R, set by the launcher in slot 0 once MAX have
 *                    joined, or MIN have and the last call has passed; a launcher whose slot is
 *                    not below it joined too late and waits for the next round
 *   r<R>/waiting     a counter of the nodes that came late to round R while it had fewer than MAX
 *                    nodes; once it is above 0 the round's launchers stop their workers at a step
 *                    boundary and advance `round`. A node late to a round of MAX nodes exits 0.
 *   r<R>/failed      why round R failed (the first reason wins); ends the round on every node,
 *                    and counts as one of the job's restarts
 *   r<R>/beat/<S>    the heartbeat of the launcher in slot S of round R (heartbeat.ts): a counter
 *                    it adds 1 to every second from joining until it leaves the round, then
 *                    "left". A node of the round whose counter stays the same for 15 s (killed,
 *                    hung, cut off) fails the round, named, and the survivors meet in the next
 *   r<R>/node/<S>    who holds slot S: "node N (launcher pid P on HOST)"
 *   done             set by a node whose workers all succeeded; a waiting node then exits 0
 * A static multi-node job that may restart (`--nnodes N --max-restarts K`) runs the same rounds
 * with MIN = MAX = N, each node keeping its `--node-rank` as its place, so that every node
 * restarts in the same round; a node late to such a round waits for its next restart. The store
 * lives on node 0's launcher: losing node 0 ends the job, as losing torchrun's c10d store host
 * does.
 * @module
 */

import { join } from "node:path";
import { StoreClient } from "../distributed/store/client.ts";
import { printLedgerDiagnosis } from "./ledger.ts";
import type { LaunchOptions } from "./options.ts";
import { Heartbeat, HeartbeatWatch } from "./heartbeat.ts";
import { POLL_MS, Rendezvous, RENDEZVOUS_TIMEOUT_MS, type Round, sleep } from "./rendezvous.ts";
import { describeExit, signalExitCode, type Supervisor, type WorkerExit } from "./supervisor.ts";

/** How one round ended on this node. */
type RoundEnd =
  | { kind: "finished" }
  | { kind: "stopped" }
  | { kind: "failed"; failed: WorkerExit | null; otherFailed: boolean };

/** Runs an elastic job on this node; resolves to the launcher's exit code. */
export async function runElastic(
  options: LaunchOptions,
  token: string,
  supervisor: Supervisor,
): Promise<number> {
  const reach = {
    hostname: options.masterAddr,
    port: options.masterPort,
    token,
    timeoutMs: RENDEZVOUS_TIMEOUT_MS,
  };
  const store = await StoreClient.connect(reach);
  const heartbeat = await Heartbeat.connect(reach).catch((error) => {
    store.close();
    throw error;
  });
  // The stop files of this node's rounds, in a folder of this launcher's own.
  const stopDir = options.minNodes < options.nnodes
    ? await Deno.makeTempDir({ prefix: "dtrain-stop-" })
    : null;
  try {
    // Nodes that disagree on MIN:MAX would disagree on which rounds can grow, and so on the
    // collectives their workers run (stop_request.ts): the first node's pair is the job's.
    const shape = `${options.minNodes}:${options.nnodes}`;
    const jobShape = decode(await store.compareSet("elastic/nnodes", "", shape));
    if (jobShape !== shape) {
      console.error(
        `launch: this node has --nnodes ${shape}, but the job runs with --nnodes ${jobShape} ` +
          `(its first node's); give every node the same`,
      );
      return 2;
    }
    const rdzv = new Rendezvous(store, options, heartbeat);
    for (;;) {
      const place = await rdzv.join();
      if (place === "done") {
        console.error("launch: the job finished without this node");
        return 0;
      }
      if (place === "full") {
        console.error(
          `launch: the job already runs on its maximum of ${options.nnodes} nodes (--nnodes ` +
            `${options.minNodes}:${options.nnodes}); this node is not needed`,
        );
        return 0;
      }
      const { round, nodes, node: slot } = place;
      console.error(
        `launch: round ${round}: node ${slot} of ${nodes} (world size ${
          nodes * options.nprocPerNode
        })`,
      );
      // Only a round with room can be asked to stop for a newcomer.
      const stopFile = stopDir && nodes < options.nnodes ? join(stopDir, `r${round}`) : undefined;
      const watch = new HeartbeatWatch(store, round, nodes, place.slot);
      const end = await runRound(rdzv, supervisor, place, watch, stopFile);
      // This node's silence from now on is no death (heartbeat.ts).
      await heartbeat.leave();
      if (supervisor.interruptedBy) return signalExitCode(supervisor.interruptedBy);
      if (end.kind === "finished") {
        await finish(store, `elastic/r${round}/finished`, nodes, options.nodeRank === 0);
        return 0;
      }
      if (end.kind === "stopped") {
        console.error(
          `launch: round ${round} stopped at a step boundary to admit the waiting node(s); ` +
            `the next round resumes from the snapshot`,
        );
        await store.compareSet("elastic/round", String(round), String(round + 1));
        continue;
      }
      const { failed, otherFailed } = end;
      // A worker ended by the SIGTERM that another node's failure made us send is no cause.
      const mine = failed && !(otherFailed && failed.signal === "SIGTERM")
        ? `node ${slot}: rank ${failed.rank} ${describeExit(failed)}`
        : "";
      const first = await rdzv.fail(round, mine || "?");
      // The first node to notice names the round's failure; this node's own may be the cause.
      const reason = mine && mine !== first ? `${first}; on this node, ${mine}` : first;
      printLedgerDiagnosis(supervisor.logDir, supervisor.localRanks());
      const restarts = await rdzv.failedRounds(round);
      if (restarts >= options.maxRestarts) {
        console.error(
          `launch: round ${round} failed (${reason}); no restarts left ` +
            `(${options.maxRestarts} per job)`,
        );
        return 1;
      }
      await store.compareSet("elastic/round", String(round), String(round + 1));
      console.error(
        `launch: round ${round} failed (${reason}); restarting with the nodes that are up ` +
          `(restart ${restarts + 1}/${options.maxRestarts} of the job)`,
      );
    }
  } finally {
    heartbeat.close();
    store.close();
    if (stopDir) await Deno.remove(stopDir, { recursive: true });
  }
}

/**
 * Runs this node's workers for one round. Another node's failure ends the round here too, and so
 * does another node's silence (`heartbeats`), which fails the round naming that node; a node
 * waiting to join (a round with a `stopFile` only) makes this launcher create the file, and the
 * workers stop at their next step boundary.
 */
async function runRound(
  rdzv: Rendezvous,
  supervisor: Supervisor,
  { round, nodes, node: slot }: Round,
  heartbeats: HeartbeatWatch,
  stopFile: string | undefined,
): Promise<RoundEnd> {
  const failedKey = `elastic/r${round}/failed`;
  let otherFailed = false, watching = true, asked = false;
  const watch = (async () => {
    while (watching) {
      const silent = await heartbeats.silent();
      if (silent !== null) await rdzv.fail(round, silent);
      if (await rdzv.has(failedKey)) {
        otherFailed = true;
        await supervisor.stopGroup();
        return;
      }
      const waiting = stopFile && !asked ? await rdzv.count(`elastic/r${round}/waiting`) : 0;
      if (stopFile && waiting > 0) {
        asked = true;
        await Deno.writeTextFile(stopFile, "");
        console.error(
          `launch: round ${round}: ${waiting} node(s) waiting to join; stopping the workers ` +
            `at their next step boundary`,
        );
      }
      await sleep(POLL_MS);
    }
  })();
  const failed = await supervisor.runGroup(round, { nodeRank: slot, nnodes: nodes, stopFile });
  watching = false;
  await watch;
  if (failed !== null || otherFailed) return { kind: "failed", failed, otherFailed };
  return { kind: supervisor.stoppedOnRequest ? "stopped" : "finished" };
}

const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/**
 * Records that this node's workers all succeeded. The node hosting the store keeps it up until
 * every node of the round has said so (or 10 s passed); on the others the store may already be
 * gone, which is fine: the job is done.
 */
async function finish(store: StoreClient, key: string, nodes: number, host: boolean) {
  try {
    await store.set("elastic/done", "1");
    let finished = await store.add(key, 1);
    for (const deadline = Date.now() + 10_000; host && finished < nodes && Date.now() < deadline;) {
      await sleep(POLL_MS);
      finished = await store.add(key, 0);
    }
  } catch (error) {
    if (host) throw error;
  }
}
