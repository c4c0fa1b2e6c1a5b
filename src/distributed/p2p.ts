/**
 * Point-to-point messages, as `torch.distributed` has them: `send`, `recv`, `isend`, `irecv` and
 * `batchIsendIrecv`. Ranks are global ranks, translated to the group's own; `recv` fills the
 * tensor it is given. Messages between two ranks match in the order each side posts them (as on
 * NCCL), and the receiver checks the sender's dtype, bytes, shape and tag against its own before
 * any payload moves: a mismatch fails both sides with one message naming both ranks and both tags
 * ([Note: point-to-point protocol] in csrc/gloo/p2p_message.h). A message with no matching call
 * on the other side times out after the group's timeout, naming the peer; a dead peer is named at
 * once. Messages run beside the group's collectives, not queued behind them.
 * @module
 */

import { bufferOf, invalid } from "./arguments.ts";
import { diagnoseLater } from "./_pending_diagnosis.ts";
import { DistError } from "./errors.ts";
import type { PostedP2P, TensorLike } from "./backend.ts";
import { nbytes } from "./backend.ts";
import { worldGroup } from "./init.ts";
import { hold } from "./ownership.ts";
import { trackPointToPoint } from "./track.ts";
import type { ProcessGroup } from "./process_group.ts";
import { Work } from "./work.ts";

/** Where a message goes and how it is told apart. */
export interface P2POptions {
  /** The group (default: the world); `dst` and `src` are global ranks of its members. */
  group?: ProcessGroup;
  /** Both sides give the same tag, 0 to 2³² − 1 (default 0); it is checked, not matched on. */
  tag?: number;
}

/** What a posted message needs to be run and recorded. */
interface Posted {
  group: ProcessGroup;
  posted: PostedP2P;
  /** Called once it has ended (with its error if it failed): releases the tensor, records it. */
  settle: (err?: unknown) => void;
}

const MAX_TAG = 2 ** 32 - 1;

/** Checks the message and posts it on the backend that reaches `t`. */
function post(
  what: string,
  kind: "send" | "recv",
  t: TensorLike,
  peer: number,
  options?: P2POptions,
): Posted {
  return prepare(what, kind, t, peer, options)();
}

/** Checks the message's arguments; the returned function posts it. */
function prepare(
  what: string,
  kind: "send" | "recv",
  t: TensorLike,
  peer: number,
  options: P2POptions = {},
): () => Posted {
  const group = options.group ?? worldGroup(what);
  const tag = options.tag ?? 0;
  if (!Number.isInteger(tag) || tag < 0 || tag > MAX_TAG) {
    throw invalid(`${what}: tag must be an integer from 0 to ${MAX_TAG}, got ${tag}`);
  }
  const role = kind === "send" ? "dst" : "src";
  const buf = bufferOf(what, "tensor", t);
  const backend = group.serving(what, [t], "sendRecv");
  const at = group.ranks.indexOf(peer);
  if (!Number.isInteger(peer) || at < 0) {
    throw invalid(`${what}: ${role} ${peer} is not a rank of this group (ranks ${group.ranks})`);
  }
  if (at === group.rank) throw invalid(`${what}: ${role} ${peer} is this rank itself`);
  const shape = t.shape ?? [buf.count];
  if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw invalid(`${what}: tensor shape [${shape}] is not a list of sizes`);
  }
  return () => {
    const posted = backend.postP2P({ kind, peer: at, buf, tag, shape });
    const me = group.ranks[group.rank];
    const tracked = trackPointToPoint(group.name, kind, t, nbytes(buf), me, peer, tag).start();
    const release = hold([t], what, tracked);
    return {
      group,
      posted,
      settle: (err?: unknown) => {
        release();
        tracked.settle(err);
      },
    };
  };
}

/** Each group's first diagnosed point-to-point failure: the one that broke its traffic. */
const firstDiagnosis = new WeakMap<ProcessGroup, Promise<{ cause: unknown; found: unknown }>>();

/**
 * The error a failed message rejects with. A dead or hung peer is diagnosed once per group (who
 * died, who hangs): later messages fail "broken" (or also "peer") because of that same failure,
 * often sooner than its diagnosis ends, and carry its findings instead of a second diagnosis.
 */
async function diagnosed(group: ProcessGroup, err: unknown): Promise<unknown> {
  if (!(err instanceof DistError) || !["peer", "timeout", "broken"].includes(err.code)) {
    return group.diagnose(err);
  }
  let first = firstDiagnosis.get(group);
  if (first === undefined) {
    if (err.code === "broken") return err;
    first = group.diagnose(err).then((found) => ({ cause: err, found }));
    firstDiagnosis.set(group, first);
  }
  const { cause, found } = await first;
  if (cause === err) return found;
  const [before, after] = [(cause as Error).message, (found as Error).message];
  if (after === before || !after.startsWith(before)) return err;
  return new DistError(err.code, err.message + after.slice(before.length), { cause: err });
}

/** Runs a posted message off the JavaScript thread, as a Work. */
function started({ group, posted, settle }: Posted): Work {
  const done = posted.run().then(() => settle(), async (err) => {
    settle(err);
    throw await diagnosed(group, err);
  });
  return new Work(done);
}

/** Runs a posted message on the calling thread; its failure is noted (_pending_diagnosis.ts). */
function blocking({ group, posted, settle }: Posted): void {
  try {
    posted.runBlocking();
  } catch (err) {
    settle(err);
    diagnoseLater(err, group);
    throw err;
  }
  settle();
}

/**
 * Sends `tensor` to rank `dst`, returning once `dst` has accepted the message and the bytes have
 * left (the receiver's `recv` posted and checked). Blocks the calling thread: for synchronous
 * code such as a pipeline stage's forward; `isend` does the same off it.
 *
 * @param tensor The tensor to send; not modified.
 * @param dst The global rank to send to; a member of the group other than this rank.
 * @param options The group and tag.
 * @throws DistError "invalid" for bad arguments or a backend without point-to-point messages;
 *   "mismatch" when `dst` expects another dtype, shape or tag; "timeout" naming `dst` when it
 *   posted no matching `recv` in time; "peer" when it died.
 *
 * @example Pass a tensor from rank 0 to rank 1
 * ```ts ignore
 * import { dist, tensor, zeros } from "../../mod.ts";
 * if (dist.getRank() === 0) dist.send(tensor([1, 2, 3]), 1);
 * else dist.recv(zeros([3]), 0); // now [1, 2, 3]
 * ```
 */
export function send(tensor: TensorLike, dst: number, options?: P2POptions): void {
  blocking(post("send", "send", tensor, dst, options));
}

/**
 * Receives rank `src`'s message into `tensor`, returning once it is there. Blocks the calling
 * thread, as `send`.
 *
 * @param tensor Filled in place; its dtype, shape and bytes must be the sender's.
 * @param src The global rank to receive from; a member of the group other than this rank.
 * @param options The group and tag (the sender's).
 * @returns `src`, as PyTorch returns the sender's rank.
 * @throws DistError as `send`, naming `src`.
 */
export function recv(tensor: TensorLike, src: number, options?: P2POptions): number {
  blocking(post("recv", "recv", tensor, src, options));
  return src;
}

/**
 * `send` off the JavaScript thread.
 *
 * @param tensor The tensor to send; untouched until the Work settles.
 * @param dst The global rank to send to.
 * @param options The group and tag.
 * @returns The message in flight; rejects with the DistError `send` would throw.
 * @throws DistError "invalid" for bad arguments, synchronously.
 *
 * @example Exchange tensors with a neighbour in a ring
 * ```ts ignore
 * import { dist, tensor, zeros } from "../../mod.ts";
 * const [rank, size] = [dist.getRank(), dist.getWorldSize()];
 * const inbox = zeros([2]);
 * const works = dist.batchIsendIrecv([
 *   dist.P2POp(dist.isend, tensor([rank, rank]), (rank + 1) % size),
 *   dist.P2POp(dist.irecv, inbox, (rank + size - 1) % size),
 * ]);
 * await Promise.all(works); // inbox holds the previous rank's tensor
 * ```
 */
export function isend(tensor: TensorLike, dst: number, options?: P2POptions): Work {
  return started(post("isend", "send", tensor, dst, options));
}

/**
 * `recv` off the JavaScript thread.
 *
 * @param tensor Filled in place once the Work resolves.
 * @param src The global rank to receive from.
 * @param options The group and tag (the sender's).
 * @returns The message in flight; rejects with the DistError `recv` would throw.
 * @throws DistError "invalid" for bad arguments, synchronously.
 */
export function irecv(tensor: TensorLike, src: number, options?: P2POptions): Work {
  return started(post("irecv", "recv", tensor, src, options));
}

/** One message of `batchIsendIrecv`, made by {@linkcode P2POp}. */
export interface P2POp {
  /** `isend` or `irecv`. */
  readonly op: typeof isend | typeof irecv;
  /** The tensor to send, or to receive into. */
  readonly tensor: TensorLike;
  /** The global rank on the other side. */
  readonly peer: number;
  /** The group (default: the world). */
  readonly group?: ProcessGroup;
  /** The tag (default 0). */
  readonly tag: number;
}

/**
 * Describes one message for `batchIsendIrecv`, as `torch.distributed.P2POp`.
 *
 * @param op `isend` or `irecv`.
 * @param tensor The tensor to send, or to receive into.
 * @param peer The global rank on the other side.
 * @param group The group (default: the world).
 * @param tag The tag (default 0).
 * @returns The message, not yet posted.
 * @throws DistError "invalid" when `op` is neither `isend` nor `irecv`.
 */
export function P2POp(
  op: typeof isend | typeof irecv,
  tensor: TensorLike,
  peer: number,
  group?: ProcessGroup,
  tag = 0,
): P2POp {
  if (op !== isend && op !== irecv) {
    throw invalid("P2POp: op must be dist.isend or dist.irecv");
  }
  return { op, tensor, peer, group, tag };
}

/**
 * Posts every message of `ops`, in order, and runs them all at once, so that sends and receives
 * in both directions between the same ranks cannot wait on each other. Every argument is checked
 * before any message is posted.
 *
 * @param ops The messages, from `P2POp`.
 * @returns One Work per message, in the order of `ops`.
 * @throws DistError "invalid" for an empty list or a bad message, before anything is posted.
 */
export function batchIsendIrecv(ops: readonly P2POp[]): Work[] {
  return postAll(prepareBatch("batchIsendIrecv", ops)).map(started);
}

/**
 * Posts a checked batch in order. A backend may still refuse a message at its post (shm+gloo, for
 * a peer it has no connection to): those posted before it have their numbers, so they run anyway
 * (and fail on their own, as their peer's calls decide), keeping the pairs' counts in step.
 */
function postAll(posts: (() => Posted)[]): Posted[] {
  const posted: Posted[] = [];
  try {
    for (const p of posts) posted.push(p());
  } catch (err) {
    posted.forEach(started);
    throw err;
  }
  return posted;
}

/** Checks every message of a batch; the returned functions post them, in order. */
function prepareBatch(what: string, ops: readonly P2POp[]): (() => Posted)[] {
  if (!Array.isArray(ops) || ops.length === 0) {
    throw invalid(`${what}: ops must be a non-empty list`);
  }
  ops.forEach((o, i) => {
    if (o === null || typeof o !== "object" || (o.op !== isend && o.op !== irecv)) {
      throw invalid(`${what}: ops[${i}] is not a P2POp of dist.isend or dist.irecv`);
    }
  });
  // Posting numbers the messages: every one is checked first, so a bad one posts none.
  return ops.map((o) =>
    prepare(what, o.op === isend ? "send" : "recv", o.tensor, o.peer, {
      group: o.group,
      tag: o.tag,
    })
  );
}

/**
 * `batchIsendIrecv` on the calling thread, returning once every message has moved: for
 * synchronous code that sends and receives at once (a pipeline stage passing activations on while
 * gradients come back). Every message but the last moves on a worker thread, the last on this
 * one, so sends and receives in both directions cannot wait on each other.
 *
 * @param ops The messages, from `P2POp`.
 * @throws DistError "invalid" for an empty list or a bad message, before anything is posted;
 *   otherwise the first failed message's DistError, once every message has ended.
 */
export function batchIsendIrecvBlocking(ops: readonly P2POp[]): void {
  const what = "batchIsendIrecvBlocking";
  const posted = postAll(prepareBatch(what, ops));
  const waits = posted.slice(0, -1).map((p) => p.posted.start());
  const failures: unknown[] = [];
  try {
    blocking(posted[posted.length - 1]);
  } catch (err) {
    failures.push(err);
  }
  waits.forEach((wait, i) => {
    try {
      wait();
    } catch (err) {
      failures.push(err);
      diagnoseLater(err, posted[i].group);
      return posted[i].settle(err); // the ledger records it failed
    }
    posted[i].settle();
  });
  if (failures.length > 0) throw failures[0];
}
