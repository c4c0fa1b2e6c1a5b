// What the fault-tolerance tests share: the store they host, the replicas' environment, their JSON
// event lines, and the check that a run took every sample at most once.
import assert from "node:assert/strict";
import { StoreClient } from "../../src/distributed/store/client.ts";
import { StoreServer } from "../../src/distributed/store/server.ts";
import { stepSamples } from "../../src/parallel/ft/samples.ts";
import type { RankProcess, RankResult } from "../_harness/ranks.ts";

const TOKEN = "ft-test-token";
export const BATCH = 12;

export interface Event {
  replica: number;
  event: string;
  step: number;
  start?: number;
  end?: number;
  members?: number[];
  healed?: boolean;
}

export function parse(line: string): Event | null {
  return line.startsWith('{"replica"') ? JSON.parse(line) : null;
}

/** Each replica's JSON event lines. */
export function eventsOf(results: RankResult[]): Event[] {
  return results.flatMap((r) => r.stdout.split("\n").map(parse).filter((e) => e !== null));
}

/**
 * Checks every committed step: all who printed its commit name the same members and took their
 * share of `stepSamples` (a member killed before printing took its share too); no sample is taken
 * twice in the run, and the samples of steps 0..steps−1 that no share holds are the remainders.
 * @returns The samples skipped.
 */
export function checkSamples(events: Event[], steps: number): number {
  const commits = events.filter((e) => e.event === "commit");
  const taken = new Map<number, number>();
  let skipped = 0;
  for (let step = 0; step < steps; step++) {
    const printed = commits.filter((e) => e.step === step);
    assert.ok(printed.length > 0, `step ${step} never committed`);
    const members = printed[0].members!;
    const split = stepSamples(step, BATCH, members.length);
    for (const e of printed) {
      assert.deepEqual(e.members, members, `step ${step}: replica ${e.replica}'s quorum`);
      const share = split.shares[members.indexOf(e.replica)];
      assert.deepEqual({ start: e.start, end: e.end }, share, `step ${step}, replica ${e.replica}`);
    }
    split.shares.forEach(({ start, end }, i) => {
      for (let n = start; n < end; n++) {
        assert.ok(!taken.has(n), `sample ${n}: taken by ${taken.get(n)} and by ${members[i]}`);
        taken.set(n, members[i]);
      }
    });
    skipped += split.skipped === null ? 0 : split.skipped.end - split.skipped.start;
  }
  assert.equal(taken.size + skipped, steps * BATCH);
  return skipped;
}

export async function withStore<T>(
  fn: (port: number, client: StoreClient) => Promise<T>,
): Promise<T> {
  const server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
  const client = await StoreClient.connect({
    hostname: "127.0.0.1",
    port: server.port,
    token: TOKEN,
  });
  try {
    return await fn(server.port, client);
  } finally {
    client.close();
    await server.close();
  }
}

export function replicaEnv(port: number, steps: number) {
  return (replica: number): Record<string, string> => ({
    START_KEY: "test/start",
    FT_PORT: String(port),
    FT_TOKEN: TOKEN,
    REPLICA: String(replica),
    STEPS: String(steps),
    BATCH: String(BATCH),
    TIMEOUT_MS: "2000",
    JOIN_MS: "1000",
  });
}

export function signal(procs: RankProcess[], rank: number, sig: Deno.Signal): void {
  procs.find((p) => p.rank === rank)?.child.kill(sig);
}

/**
 * Sets `key` once replica `replicaId` has entered the quorum round after the last decided one:
 * the others, held at a step until `key`, then find it in their next round (so it joins before
 * the run ends, however slow its start). Reads the default prefix's keys.
 */
export async function releaseOnceEntered(
  client: StoreClient,
  replicaId: number,
  key: string,
): Promise<void> {
  const peek = (k: string) => client.get(k, 0).then((b) => new TextDecoder().decode(b), () => null);
  for (let tries = 0; tries < 1_000; tries++) {
    const next = Number(await peek("dtrain/ft/latest") ?? 0) + 1;
    const count = await client.add(`dtrain/ft/r${next}/count`, 0);
    const entries = await Promise.all(
      Array.from({ length: count }, (_, n) => peek(`dtrain/ft/r${next}/entry${n + 1}`)),
    );
    if (entries.some((e) => e !== null && JSON.parse(e).replicaId === replicaId)) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  await client.set(key, "1");
}
