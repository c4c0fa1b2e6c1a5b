/**
 * The elastic nodes' heartbeat (see [Note: elastic rendezvous] in elastic.ts): each launcher in a
 * round adds to its slot's counter in the store every second, and the others notice a node whose
 * counter stops, as torchrun's rendezvous keep-alive does, so that a node that dies after a round
 * admitted it (before its workers meet, or while they do) ends the round within seconds rather
 * than at the workers' rendezvous timeout.
 *
 * [Note: why a heartbeat, not the store connection]
 * A killed launcher's store connection closes at once, but a node that hangs, loses power or is
 * cut off from the network keeps its connection open for as long as TCP takes to give up, so the
 * counter is what counts. It is judged on the watcher's own clock (no clocks are compared across
 * hosts) by whether it changed, so a watcher that stalls itself sees a new value when it wakes
 * and accuses nobody. It beats on a connection of its own: the launcher's other connection
 * blocks for minutes in the rendezvous's waits, and requests on one connection are answered in
 * order.
 * @module
 */

import { DistError } from "../distributed/errors.ts";
import { StoreClient, type StoreClientOptions } from "../distributed/store/client.ts";

/** How often a launcher in a round adds to its heartbeat counter. */
export const HEARTBEAT_MS = 1000;

/**
 * How long a node's counter may stay the same before the others give up on it: 15 missed beats,
 * room for a loaded machine, and half the 30 s in which torchrun's keep-alive notices.
 */
export const NODE_TIMEOUT_MS = 15_000;

/** What a node's counter holds once it left its round on purpose (finished, stopped, failed). */
const LEFT = "left";

const beatKey = (round: number, slot: number) => `elastic/r${round}/beat/${slot}`;
const whoKey = (round: number, slot: number) => `elastic/r${round}/node/${slot}`;

/** This launcher's heartbeat, for the round it is in. */
export class Heartbeat {
  #store: StoreClient;
  #timer: ReturnType<typeof setInterval> | undefined;
  #key = "";

  private constructor(store: StoreClient) {
    this.#store = store;
  }

  /** Opens the heartbeat's own connection to the store (see the note above). */
  static async connect(options: StoreClientOptions): Promise<Heartbeat> {
    return new Heartbeat(await StoreClient.connect(options));
  }

  /**
   * Starts beating for slot `slot` of round `round` (and stops beating for any earlier one), after
   * saying who holds the slot: `node` is the node's place in the round, as its launcher prints it.
   */
  async start(round: number, slot: number, node: number): Promise<void> {
    this.#stopTimer();
    const key = this.#key = beatKey(round, slot);
    await this.#store.set(
      whoKey(round, slot),
      `node ${node} (launcher pid ${Deno.pid} on ${Deno.hostname()})`,
    );
    const beat = () => void this.#store.add(key, 1).catch(() => {});
    beat();
    this.#timer = setInterval(beat, HEARTBEAT_MS);
  }

  /**
   * Stops beating and marks the slot as left on purpose, so that the round's other nodes, still
   * finishing (a rank saving the final weights), never take this node's silence for a death.
   */
  async leave(): Promise<void> {
    this.#stopTimer();
    // A store already gone (the job ended) needs no mark.
    if (this.#key) await this.#store.set(this.#key, LEFT).catch(() => {});
    this.#key = "";
  }

  /** Stops beating and closes the connection. */
  close(): void {
    this.#stopTimer();
    this.#store.close();
  }

  #stopTimer(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * Watches the heartbeats of the other nodes of one round: `silent()` names a node whose counter
 * has not changed for NODE_TIMEOUT_MS on this launcher's clock.
 */
export class HeartbeatWatch {
  #store: StoreClient;
  #round: number;
  #others: number[];
  /** Per slot: the counter last read (null: not set yet) and when it was first read as such. */
  #seen = new Map<number, { value: string | null; since: number }>();
  #lastCheck = 0;

  /**
   * @param store The launcher's connection to the store.
   * @param round The round.
   * @param nodes Its number of nodes.
   * @param mySlot This launcher's slot in it (not watched).
   */
  constructor(store: StoreClient, round: number, nodes: number, mySlot: number) {
    this.#store = store;
    this.#round = round;
    this.#others = Array.from({ length: nodes }, (_, s) => s).filter((s) => s !== mySlot);
  }

  /**
   * Reads the counters (at most once per HEARTBEAT_MS); resolves to why the first node whose
   * counter stopped is taken for dead, or null. A store that cannot be read judges nobody: losing
   * the store ends the round anyway.
   */
  async silent(): Promise<string | null> {
    const now = Date.now();
    if (now - this.#lastCheck < HEARTBEAT_MS) return null;
    this.#lastCheck = now;
    for (const slot of this.#others) {
      let value: string | null;
      try {
        value = decode(await this.#store.get(beatKey(this.#round, slot), 0));
      } catch (error) {
        if (!(error instanceof DistError) || error.code !== "timeout") return null;
        value = null; // not set yet: its launcher died between joining and its first beat
      }
      if (value === LEFT) continue;
      const seen = this.#seen.get(slot);
      if (seen === undefined || seen.value !== value) {
        this.#seen.set(slot, { value, since: Date.now() });
      } else if (Date.now() - seen.since >= NODE_TIMEOUT_MS) {
        return `${await this.#who(slot)} stopped answering: no heartbeat in the store for ` +
          `${Math.round((Date.now() - seen.since) / 1000)} s (killed, hung or cut off)`;
      }
    }
    return null;
  }

  /** Who held `slot`, as its launcher said when it joined. */
  async #who(slot: number): Promise<string> {
    try {
      return decode(await this.#store.get(whoKey(this.#round, slot), 0));
    } catch {
      return `node in slot ${slot} (it died before saying which)`;
    }
  }
}

const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
