/**
 * One node's side of the elastic rendezvous (see [Note: elastic rendezvous] in elastic.ts): joins
 * the round being formed, closes it from slot 0, and waits for the next one when it comes late.
 * @module
 */

import type { StoreClient } from "../distributed/store/client.ts";
import type { Heartbeat } from "./heartbeat.ts";
import type { LaunchOptions } from "./options.ts";

/** This node's place in one round. */
export interface Round {
  round: number;
  /** The order in which this node joined the round; the round's nodes are slots 0..nodes-1. */
  slot: number;
  nodes: number;
  /** This node's place among them: its slot, or its `--node-rank` in a static job. */
  node: number;
}

/** How long a launcher waits for a round to form before giving up. */
export const RENDEZVOUS_TIMEOUT_MS = 600_000;

/** How often a launcher looks at the store while it waits or runs a round. */
export const POLL_MS = 100;

const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The elastic rendezvous in the job's store, for one node. */
export class Rendezvous {
  #store: StoreClient;
  #options: LaunchOptions;
  #heartbeat: Heartbeat;

  /**
   * @param store The launcher's connection to the store.
   * @param options The launcher's options.
   * @param heartbeat Started for each round this node joins (heartbeat.ts).
   */
  constructor(store: StoreClient, options: LaunchOptions, heartbeat: Heartbeat) {
    this.#store = store;
    this.#options = options;
    this.#heartbeat = heartbeat;
  }

  /** Whether `key` is set (false as well when the store cannot be reached). */
  has(key: string): Promise<boolean> {
    return this.#store.get(key, 0).then(() => true, () => false);
  }

  /** A counter's value: 0 when it is not set or the store cannot be reached. */
  count(key: string): Promise<number> {
    return this.#store.get(key, 0).then((v) => Number(decode(v)), () => 0);
  }

  async #number(key: string): Promise<number> {
    return Number(decode(await this.#store.get(key, 0)));
  }

  /**
   * Joins the round being formed. Comes a node late to an elastic round that has room (fewer
   * than MAX nodes), it says so in the round's `waiting` counter, so that the round's nodes stop
   * and all meet in the next one; to a round with MAX nodes, it is "full".
   * @returns This node's place, "done" if the job finished while it waited, or "full".
   */
  async join(): Promise<Round | "done" | "full"> {
    const { minNodes, nnodes } = this.#options;
    await this.#store.compareSet("elastic/round", "", "0");
    for (;;) {
      const round = await this.#number("elastic/round");
      const at = `elastic/r${round}/`;
      if (!await this.has(`${at}closed`) && !await this.has(`${at}failed`)) {
        const slot = await this.#store.add(`${at}joined`, 1) - 1;
        // A static job's nodes keep their places for its restarts.
        const node = minNodes === nnodes ? this.#options.nodeRank : slot;
        // From joining on: the round may close with this node in it at any moment.
        await this.#heartbeat.start(round, slot, node);
        if (slot === 0) await this.#close(at);
        const nodes = Number(decode(await this.#store.get(`${at}closed`, RENDEZVOUS_TIMEOUT_MS)));
        if (slot < nodes) return { round, slot, nodes, node };
        await this.#heartbeat.leave();
      }
      // A failed round ends anyway, and a static job's nodes keep their places for its restarts.
      if (minNodes < nnodes && !await this.has(`${at}failed`)) {
        if (await this.#number(`${at}closed`) >= nnodes) return "full";
        await this.#store.add(`${at}waiting`, 1);
      }
      console.error(`launch: round ${round} is under way without this node; joining the next one`);
      if (await this.#nextRound(round) === "done") return "done";
    }
  }

  /**
   * Fails round `round` for `reason`, unless another node failed it first.
   * @returns The round's failure as the store has it: the first reason given.
   */
  async fail(round: number, reason: string): Promise<string> {
    return decode(await this.#store.compareSet(`elastic/r${round}/failed`, "", reason));
  }

  /** How many of the rounds before `round` failed: the job's restarts so far. */
  async failedRounds(round: number): Promise<number> {
    let failed = 0;
    for (let r = 0; r < round; r++) if (await this.has(`elastic/r${r}/failed`)) failed++;
    return failed;
  }

  /** Slot 0 closes the round once MAX nodes joined, or MIN did and the last call has passed. */
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
