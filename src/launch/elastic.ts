/**
 * Elastic jobs (`--nnodes MIN:MAX`, as torchrun's): the launchers of the nodes that are up meet in
 * rounds in the store; each round fixes the nodes, their order and so the world size, and runs
 * every node's workers under the round's own key prefix (DTRAIN_RESTART_COUNT). When any node's
 * group fails (a lost node makes its peers' collectives fail), every launcher stops its workers
 * and the survivors meet in the next round; the job resumes from its last snapshot at the new
 * world size. Rounds are counted per job, in the store, so `--max-restarts` bounds the job's
 * restarts whatever each node saw.
 *
 * [Note: elastic rendezvous]
 * Keys, under `elastic/`:
 *   round            the round being formed or run (decimal; advanced once per failure by a
 *                    compare-and-set from r to r + 1, so two failing nodes advance it once)
 *   r<R>/joined      a counter: a launcher's slot in round R is its count minus 1
 *   r<R>/closed      the number of nodes of round R, set by the launcher in slot 0 once MAX have
 *                    joined, or MIN have and the last call has passed; a launcher whose slot is
 *                    not below it joined too late and waits for the next round (so a node that
 *                    comes back joins at the next restart)
 *   r<R>/failed      why round R failed (the first reason wins); ends the round on every node
 *   done             set by a node whose workers all succeeded; a waiting node then exits 0
 * A static multi-node job that may restart (`--nnodes N --max-restarts K`) runs the same rounds
 * with MIN = MAX = N, each node keeping its `--node-rank` as its place, so that every node
 * restarts in the same round. The store lives on node 0's launcher: losing node 0 ends the job, as losing torchrun's c10d
 * store host does.
 * @module
 */

import { StoreClient } from "../dist/store/client.ts";
import type { LaunchOptions } from "./options.ts";
import { describeExit, signalExitCode, type Supervisor } from "./supervisor.ts";

/** This node's place in one round. */
interface Round {
  round: number;
  slot: number;
  nodes: number;
}

const POLL_MS = 100;
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs an elastic job on this node; resolves to the launcher's exit code. */
export async function runElastic(
  options: LaunchOptions,
  token: string,
  supervisor: Supervisor,
): Promise<number> {
  const store = await StoreClient.connect({
    hostname: options.masterAddr,
    port: options.masterPort,
    token,
    timeoutMs: RENDEZVOUS_TIMEOUT_MS,
  });
  try {
    const rdzv = new Rendezvous(store, options);
    for (;;) {
      const place = await rdzv.join();
      if (place === "done") {
        console.error("launch: the job finished without this node");
        return 0;
      }
      const { round, nodes } = place;
      const slot = options.minNodes === options.nnodes ? options.nodeRank : place.slot;
      console.error(
        `launch: round ${round}: node ${slot} of ${nodes} (world size ${
          nodes * options.nprocPerNode
        })`,
      );
      const failedKey = `elastic/r${round}/failed`;
      // Another node's failure ends this round here too.
      let otherFailed = false, watching = true;
      const watch = (async () => {
        while (watching) {
          if (await rdzv.has(failedKey)) {
            otherFailed = true;
            await supervisor.stopGroup();
            return;
          }
          await sleep(POLL_MS);
        }
      })();
      const failed = await supervisor.runGroup(round, { nodeRank: slot, nnodes: nodes });
      watching = false;
      await watch;
      if (supervisor.interruptedBy) return signalExitCode(supervisor.interruptedBy);
      if (failed === null && !otherFailed) {
        await finish(store, `elastic/r${round}/finished`, nodes, options.nodeRank === 0);
        return 0;
      }
      // A worker ended by the SIGTERM that another node's failure made us send is no cause.
      const mine = failed && !(otherFailed && failed.signal === "SIGTERM")
        ? `node ${slot}: rank ${failed.rank} ${describeExit(failed)}`
        : "";
      const first = decode(await store.compareSet(failedKey, "", mine || "?"));
      // The first node to notice names the round's failure; this node's own may be the cause.
      const reason = mine && mine !== first ? `${first}; on this node, ${mine}` : first;
      if (round >= options.maxRestarts) {
        console.error(
          `launch: round ${round} failed (${reason}); no restarts left ` +
            `(${options.maxRestarts} per job)`,
        );
        return 1;
      }
      await store.compareSet("elastic/round", String(round), String(round + 1));
      console.error(
        `launch: round ${round} failed (${reason}); restarting with the nodes that are up ` +
          `(restart ${round + 1}/${options.maxRestarts} of the job)`,
      );
    }
  } finally {
    store.close();
  }
}

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

/** How long a launcher waits for a round to form before giving up. */
const RENDEZVOUS_TIMEOUT_MS = 600_000;

/** One node's side of the elastic rendezvous (see the note above). */
class Rendezvous {
  #store: StoreClient;
  #options: LaunchOptions;

  constructor(store: StoreClient, options: LaunchOptions) {
    this.#store = store;
    this.#options = options;
  }

  has(key: string): Promise<boolean> {
    return this.#store.get(key, 0).then(() => true, () => false);
  }

  async #number(key: string): Promise<number> {
    return Number(decode(await this.#store.get(key, 0)));
  }

  /** Joins the round being formed; "done" if the job finished while this node waited. */
  async join(): Promise<Round | "done"> {
    await this.#store.compareSet("elastic/round", "", "0");
    for (;;) {
      const round = await this.#number("elastic/round");
      const at = `elastic/r${round}/`;
      if (!await this.has(`${at}closed`) && !await this.has(`${at}failed`)) {
        const slot = await this.#store.add(`${at}joined`, 1) - 1;
        if (slot === 0) await this.#close(at);
        const nodes = Number(decode(await this.#store.get(`${at}closed`, RENDEZVOUS_TIMEOUT_MS)));
        if (slot < nodes) return { round, slot, nodes };
      }
      console.error(`launch: round ${round} is under way without this node; joining the next one`);
      if (await this.#nextRound(round) === "done") return "done";
    }
  }

  /** Slot 0 closes the round once MAX nodes joined, or MIN did and the last call passed. */
  async #close(at: string): Promise<void> {
    const { minNodes, nnodes, lastCallMs = 3000 } = this.#options;
    const deadline = Date.now() + RENDEZVOUS_TIMEOUT_MS;
    let enoughSince = 0;
    for (;;) {
      const joined = await this.#number(`${at}joined`);
      if (joined >= minNodes && enoughSince === 0) enoughSince = Date.now();
      if (joined >= nnodes || (enoughSince > 0 && Date.now() - enoughSince >= lastCallMs)) {
        await this.#store.compareSet(`${at}closed`, "", String(Math.min(joined, nnodes)));
        return;
      }
      if (Date.now() >= deadline) {
        throw new Error(
          `launch: only ${joined} of at least ${minNodes} nodes joined the rendezvous within ` +
            `${RENDEZVOUS_TIMEOUT_MS / 1000} s`,
        );
      }
      await sleep(POLL_MS);
    }
  }

  /** Waits until a round after `round` opens, or the job is done. */
  async #nextRound(round: number): Promise<"next" | "done"> {
    for (;;) {
      if (await this.has("elastic/done")) return "done";
      if (await this.#number("elastic/round") > round) return "next";
      await sleep(POLL_MS);
    }
  }
}
