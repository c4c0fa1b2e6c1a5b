/**
 * Worker for ownership_test.ts: every way of using a tensor that a collective in flight owns
 * (reading it, an op taking it as input, an in-place op, a view, an optimizer step, a message
 * posted with `isend`/`irecv`, a started all-gather) throws an error naming the collective, and
 * the same uses succeed once it was awaited. Each refused use is recorded by its error message;
 * the lines the test expects in those messages carry the comment `issued: NAME`.
 * @module
 */

import {
  allReduce,
  barrier,
  destroyProcessGroup,
  initProcessGroup,
  irecv,
  isend,
} from "../../../src/distributed/mod.ts";
import { ledgerSeq } from "../../../src/distributed/ledger.ts";
import { Parameter } from "../../../src/nn/parameter.ts";
import { SGD } from "../../../src/optim/sgd.ts";
import { full, zeros } from "../../../src/tensor/creation.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";

/** The message of what `use` throws, or "no error". */
function refusal(use: () => unknown): string {
  try {
    use();
  } catch (err) {
    return (err as Error).message;
  }
  return "no error";
}

await runWorker(async () => {
  const group = await initProcessGroup({
    backend: "gloo",
    timeoutMs: envInt("TEST_TIMEOUT_MS", 30_000),
  });
  const { rank, size } = group;
  const refused: Record<string, string> = {};
  const values: Record<string, number[]> = {};
  /** Each issued call's op number in its group, as the ledger counts it. */
  const seqs: Record<string, number> = {};

  // A PyTorch habit: all-reduce, then read without awaiting.
  const t = full([4], rank + 1);
  const work = allReduce(t); // issued: allReduce
  seqs.allReduce = ledgerSeq(group.name);
  refused.toArray = refusal(() => t.toArray());
  refused.item = refusal(() => t.view(2, 2).sum().item());
  refused.input = refusal(() => t.add(1));
  refused.inPlace = refusal(() => t.mul_(2));
  refused.print = refusal(() => String(t));
  await work;
  values.awaited = Array.from(t.toArray());

  // Awaited at once: the right sum, nothing refused.
  const u = full([3], 10 * (rank + 1));
  await allReduce(u);
  values.sum = Array.from(u.add(1).toArray());

  // Collectives run in issue order, so a second one may take a tensor the first still owns.
  const twice = full([2], rank + 1);
  const first = allReduce(twice), second = allReduce(twice);
  await first;
  await second;
  values.twice = Array.from(twice.toArray());

  // An optimizer step on a parameter whose gradient is being reduced.
  const p = new Parameter(full([2], 1));
  p.grad = full([2], rank + 1);
  const optimizer = new SGD([p], { lr: 0.5 });
  const reducing = allReduce(p.grad); // issued: gradient
  seqs.gradient = ledgerSeq(group.name);
  refused.step = refusal(() => optimizer.step());
  await reducing.wait();
  optimizer.step();
  values.stepped = Array.from(p.toArray());

  // A message in flight: the sender's tensor cannot be written, nor the receiver's read.
  const message = full([5], 7);
  if (rank === 0) {
    const sent = isend(message, 1); // issued: isend
    seqs.isend = ledgerSeq(`${group.name} 0-1`);
    refused.isend = refusal(() => message.fill_(0));
    await sent;
  } else {
    const received = irecv(message.fill_(0), 0); // issued: irecv
    seqs.irecv = ledgerSeq(`${group.name} 0-1`);
    refused.irecv = refusal(() => message.toArray());
    await received;
  }
  values.message = Array.from(message.toArray());

  // A started all-gather owns its output until waitBlocking.
  if (group.canStartAllGather) {
    const gathered = zeros([size * 2]);
    const started = group.allGatherStart(gathered, full([2], rank)); // issued: allGatherStart
    seqs.started = ledgerSeq(group.name);
    refused.started = refusal(() => gathered.toArray());
    started.waitBlocking();
    values.gathered = Array.from(gathered.toArray());
  }

  await barrier();
  const backend = group.backendName;
  await destroyProcessGroup();
  return { refused, values, seqs, backend };
});
