/**
 * The quorum and the commit vote of fault-tolerant replicas, kept in the rendezvous store: the
 * store plays torchft's Lighthouse (who is in this step's quorum) and its per-step commit vote.
 * Every decision is one `compareSet` on a key of its own, so whoever writes first decides and
 * every replica reads the same answer, however late it looks.
 * @module
 */

import { DistError } from "../../distributed/errors.ts";
import type { StoreClient } from "../../distributed/store/client.ts";

/**
 * Replicas announce `LIVENESS_RANK_BASE + replicaId` to the store: the store's `connectedRanks`
 * then tells which replicas still hold a connection (a SIGKILLed one has none), apart from the
 * group ranks 0..n−1 that Gloo's rendezvous announces on its own short-lived connections.
 */
export const LIVENESS_RANK_BASE = 1 << 20;

/** A replica as it enters a quorum round. */
export interface QuorumMember {
  /** The replica's id (a non-negative integer, unique among live replicas). */
  replicaId: number;
  /** Steps it has committed. */
  step: number;
  /** Whether its last step failed to commit (the group is formed afresh after a failure). */
  errored: boolean;
}

/** A decided quorum: the replicas that take the next step together. */
export interface Quorum {
  /** The round that decided it (one per `startQuorum`, increasing). */
  round: number;
  /**
   * The id of the communicator: it changes (to the round's number) when the members change or
   * one of them failed its last step, and stays while the same replicas go on without failure.
   */
  quorumId: number;
  /** The members, by ascending `replicaId`. */
  members: QuorumMember[];
}

/** How a round waits. */
export interface QuorumTimeouts {
  /** Fewest replicas a quorum may have. */
  minReplicas: number;
  /**
   * How long a round waits for stragglers: live replicas that have not entered it (a hung
   * member of the last quorum, a replica still starting), counted from this replica's entry.
   */
  joinTimeoutMs: number;
  /** Longest wait for a quorum at all (fewer than `minReplicas` live replicas). */
  quorumTimeoutMs: number;
}

const POLL_MS = 20;

/** The store's keys of one job's quorums, under a prefix. */
export class QuorumKeys {
  /** @param prefix The job's prefix, ending in "/". */
  constructor(readonly prefix: string) {}
  /** The last decided round's number. */
  get latest(): string {
    return `${this.prefix}latest`;
  }
  /** How many entries round `r` had. */
  count(r: number): string {
    return `${this.prefix}r${r}/count`;
  }
  /** The `n`-th entry of round `r`. */
  entry(r: number, n: number): string {
    return `${this.prefix}r${r}/entry${n}`;
  }
  /** Round `r`'s quorum. */
  quorum(r: number): string {
    return `${this.prefix}r${r}/quorum`;
  }
  /** A member's vote on round `r`'s step. */
  vote(r: number, replicaId: number): string {
    return `${this.prefix}r${r}/vote${replicaId}`;
  }
  /** Whether round `r`'s step committed. */
  commit(r: number): string {
    return `${this.prefix}r${r}/commit`;
  }
  /** The prefix of the communicator of quorum id `q`. */
  group(q: number): string {
    return `${this.prefix}q${q}/`;
  }
}

const decoder = new TextDecoder();

/** `key`'s value as text, or null while it is not set (never waits). */
async function peek(store: StoreClient, key: string): Promise<string | null> {
  try {
    return decoder.decode(await store.get(key, 0));
  } catch (err) {
    if (err instanceof DistError && err.code === "timeout") return null;
    throw err;
  }
}

/** Waits up to `ms` for `key`, returning early once it is set. */
async function nap(store: StoreClient, key: string, ms: number): Promise<void> {
  try {
    await store.wait([key], Math.max(1, Math.round(ms)));
  } catch (err) {
    if (!(err instanceof DistError && err.code === "timeout")) throw err;
  }
}

/** The replica ids that hold a connection to the store. */
export async function liveReplicas(store: StoreClient): Promise<Set<number>> {
  const ranks = await store.connectedRanks();
  return new Set(ranks.filter((r) => r >= LIVENESS_RANK_BASE).map((r) => r - LIVENESS_RANK_BASE));
}

/** The round a replica that has taken part in none enters: the one after the last decided. */
export async function nextRound(store: StoreClient, keys: QuorumKeys): Promise<number> {
  return await latestRound(store, keys) + 1;
}

/**
 * Enters round `round` (and the ones after, while a round is decided without this replica) and
 * returns the first quorum that holds it.
 *
 * A round is decided once at least `minReplicas` live replicas have entered it and either every
 * live member of the last quorum has (torchft's fast quorum), or, in the first round, every live
 * replica has, or `joinTimeoutMs` has passed since this replica entered and more than half of the
 * last quorum's live members are among them (a minority never goes on beside the majority: two
 * live replicas of which one hangs wait until it dies, as torchft's Lighthouse does). A member
 * that entered and then lost its store connection (killed) is left out.
 *
 * @param housekeeper A second connection for deleting old rounds' keys off the step's path
 *   (without it they are deleted on `store`, in turn).
 * @throws DistError "timeout" after `quorumTimeoutMs` without a quorum, naming who entered.
 */
export async function joinQuorum(
  store: StoreClient,
  keys: QuorumKeys,
  me: QuorumMember,
  round: number,
  timeouts: QuorumTimeouts,
  housekeeper?: StoreClient,
): Promise<Quorum> {
  const started = performance.now();
  for (let r = round;; r++) {
    // A round up to the last decided one was decided without this replica (it had not entered
    // it), and its keys may be gone: go straight to the round after.
    r = Math.max(r, await latestRound(store, keys) + 1);
    const quorum = await decideRound(store, keys, me, r, timeouts, started, housekeeper);
    if (quorum?.members.some((m) => m.replicaId === me.replicaId)) return quorum;
  }
}

/** Round `round`'s quorum, or null when it is not decided or forgotten. */
async function peekQuorum(store: StoreClient, keys: QuorumKeys, round: number) {
  const text = await peek(store, keys.quorum(round));
  return text === null ? null : JSON.parse(text) as Quorum;
}

/** The last decided round's number (0 before the first). */
async function latestRound(store: StoreClient, keys: QuorumKeys): Promise<number> {
  return Number(await peek(store, keys.latest) ?? 0);
}

/**
 * Deletes round `round`'s keys. The decider of a round deletes those of the round two before: every
 * live replica has left it, and `joinQuorum` never enters a round at or below the last decided.
 */
async function forget(store: StoreClient, keys: QuorumKeys, round: number): Promise<void> {
  const decided = await peek(store, keys.quorum(round));
  const count = await store.add(keys.count(round), 0);
  const stale = [keys.count(round), keys.quorum(round), keys.commit(round)];
  for (let n = 1; n <= count; n++) stale.push(keys.entry(round, n));
  if (decided !== null) {
    for (const m of (JSON.parse(decided) as Quorum).members) {
      stale.push(keys.vote(round, m.replicaId));
    }
  }
  for (const key of stale) await store.delete(key);
}

async function decideRound(
  store: StoreClient,
  keys: QuorumKeys,
  me: QuorumMember,
  round: number,
  timeouts: QuorumTimeouts,
  started: number,
  housekeeper: StoreClient | undefined,
): Promise<Quorum | null> {
  const entry = await store.add(keys.count(round), 1);
  await store.set(keys.entry(round, entry), JSON.stringify(me));
  const entered = performance.now();
  const previousText = round > 1 ? await peek(store, keys.quorum(round - 1)) : null;
  // A round is entered once the one before is decided; a missing decision was forgotten, so
  // this round is decided too: move on rather than judge it without the last quorum.
  if (round > 1 && previousText === null) return await peekQuorum(store, keys, round);
  const previous = previousText === null ? null : JSON.parse(previousText) as Quorum;
  const seen = new Map<number, QuorumMember>();
  const read = new Set<number>();
  let polls = 0;
  for (;;) {
    const decided = await peek(store, keys.quorum(round));
    if (decided !== null) return JSON.parse(decided) as Quorum;
    // Decided and forgotten while this replica was stopped inside it: it is behind. (Decided
    // since the peek above, it is read again: the decision is set before `latest`.)
    if (polls++ > 0 && await latestRound(store, keys) >= round) {
      return await peekQuorum(store, keys, round);
    }
    const count = await store.add(keys.count(round), 0);
    // An entry counted but not written yet is read at a later poll: its writer is between the
    // two calls, or was stopped there (and is then left out like any straggler).
    for (let n = 1; n <= count; n++) {
      if (read.has(n)) continue;
      const text = await peek(store, keys.entry(round, n));
      if (text === null) continue;
      const member = JSON.parse(text) as QuorumMember;
      seen.set(member.replicaId, member);
      read.add(n);
    }
    const live = await liveReplicas(store);
    const members = [...seen.values()].filter((m) => live.has(m.replicaId))
      .sort((a, b) => a.replicaId - b.replicaId);
    const ids = new Set(members.map((m) => m.replicaId));
    const waited = performance.now() - entered >= timeouts.joinTimeoutMs;
    const awaited = previous === null
      ? [...live]
      : previous.members.map((m) => m.replicaId).filter((id) => live.has(id));
    // Without every live member of the last quorum, more than half of them must be here: a
    // minority (a newcomer alone, a member whose peers are busy with a long step) never goes on
    // as a quorum of its own beside the majority (split brain).
    const present = awaited.filter((id) => ids.has(id)).length;
    const carriesOn = previous === null || awaited.length === 0 || 2 * present > awaited.length;
    const ready = awaited.every((id) => ids.has(id)) || (waited && carriesOn);
    if (members.length >= timeouts.minReplicas && ready) {
      const proposal = JSON.stringify(proposeQuorum(round, members, previous));
      const stored = decoder.decode(await store.compareSet(keys.quorum(round), "", proposal));
      if (stored === proposal) {
        await store.set(keys.latest, String(round));
        // On a connection of its own when there is one: off this step's path.
        if (round > 2 && housekeeper) forget(housekeeper, keys, round - 2).catch(() => {});
        else if (round > 2) await forget(store, keys, round - 2);
      }
      return JSON.parse(stored) as Quorum;
    }
    if (performance.now() - started >= timeouts.quorumTimeoutMs) {
      throw new DistError(
        "timeout",
        `quorum: no quorum of at least ${timeouts.minReplicas} replicas within ` +
          `${timeouts.quorumTimeoutMs / 1000} s (round ${round}: replicas ` +
          `${[...ids].join(", ") || "none"} entered, live: ${[...live].join(", ") || "none"})`,
      );
    }
    await nap(store, keys.quorum(round), POLL_MS);
  }
}

/** The quorum of `members`, with a new id when they differ from the last or one failed. */
function proposeQuorum(round: number, members: QuorumMember[], previous: Quorum | null): Quorum {
  const same = previous !== null && previous.members.length === members.length &&
    previous.members.every((m, i) => m.replicaId === members[i].replicaId);
  const fresh = !same || members.some((m) => m.errored);
  return { round, quorumId: fresh ? round : previous!.quorumId, members };
}

/**
 * Casts this member's vote on round `round`'s step and returns the decision every member reads:
 * the step commits only if every member voted yes. A "no", a member that lost its store
 * connection before voting, or `timeoutMs` without every vote (a hung member) aborts it.
 */
export async function voteCommit(
  store: StoreClient,
  keys: QuorumKeys,
  quorum: Quorum,
  replicaId: number,
  vote: boolean,
  timeoutMs: number,
): Promise<boolean> {
  const { round } = quorum;
  await store.set(keys.vote(round, replicaId), vote ? "1" : "0");
  const deadline = performance.now() + timeoutMs;
  const votes = new Map<number, string>();
  let polls = 0;
  for (;;) {
    const decided = await peek(store, keys.commit(round));
    if (decided !== null) return decided === "1";
    // The others are two rounds on and the decision forgotten (this replica was stopped): what it
    // was is unknown here, so this replica takes no step and heals at its next quorum.
    if (polls++ > 0 && await latestRound(store, keys) >= round + 2) return false;
    for (const m of quorum.members) {
      if (votes.has(m.replicaId)) continue;
      const v = await peek(store, keys.vote(round, m.replicaId));
      if (v !== null) votes.set(m.replicaId, v);
    }
    const live = await liveReplicas(store);
    const gone = quorum.members.some((m) => !votes.has(m.replicaId) && !live.has(m.replicaId));
    const no = [...votes.values()].includes("0") || gone || performance.now() >= deadline;
    const yes = votes.size === quorum.members.length;
    if (no || yes) {
      const stored = await store.compareSet(keys.commit(round), "", no ? "0" : "1");
      return decoder.decode(stored) === "1";
    }
    await nap(store, keys.commit(round), POLL_MS);
  }
}
