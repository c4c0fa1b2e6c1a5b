// run: deno task launch --nproc-per-node 2 docs/guide/examples/02_failures.ts wrong
// exit: 1
// expect: error: Uncaught (in promise) DistError: op #1: rank 1 called broadcast, rank 0 called allReduce
// expect-match: launch: rank [01] \(local rank [01]\) exited with code 1; last lines of .*rank_[01]\.log:
// run: deno task launch --nproc-per-node 2 docs/guide/examples/02_failures.ts size
// exit: 1
// expect: DistError: allReduce: rank 1 sent 2 f32 elements, rank 0 expected 4 (op #1)
// run: deno task launch --nproc-per-node 2 docs/guide/examples/02_failures.ts dies
// exit: 1
// expect-match: \[rank 0\] error: Uncaught \(in promise\) DistError: allReduce \(op #1\): rank 1 died \(process \d+ exited\); rank 1 died \(left the store without reporting an error\)
// expect: launch: rank 1 (local rank 1) exited with code 3
// run: DTRAIN_SHM=0 deno task launch --nproc-per-node 2 docs/guide/examples/02_failures.ts dies
// exit: 1
// expect-match: DistError: allReduce \(op #1\): connection to rank 1 failed \(.*\); rank 1 died \(left the store without reporting an error\)
// run: deno task launch --nproc-per-node 2 docs/guide/examples/02_failures.ts hangs
// exit: 1
// expect: [rank 0] error: Uncaught (in promise) DistError: allReduce (op #1): timed out after 2000 ms waiting for rank 1 to join; rank 1 is hung (still connected, but reported no error within 1.2 s)
import { dist, tensor } from "../../../mod.ts";

const mode = Deno.args[0];
if (!["wrong", "size", "dies", "hangs"].includes(mode)) {
  throw new Error(`usage: 02_failures.ts wrong|size|dies|hangs, not ${mode}`);
}
// A short timeout, so that the hang is reported in seconds (the default is 300 000 ms, 5 minutes).
await dist.initProcessGroup({ backend: "gloo", timeoutMs: 2000 });
const rank = dist.getRank();
const t = tensor([1, 2, 3, 4]);
if (mode === "wrong") {
  // Rank 1 calls another collective than rank 0.
  if (rank === 0) await dist.allReduce(t);
  else await dist.broadcast(t, 0);
} else if (mode === "size") {
  // The same collective, with another size.
  await dist.allReduce(rank === 0 ? t : tensor([1, 2]));
} else if (mode === "dies") {
  // Rank 1's process exits before the collective.
  if (rank === 1) Deno.exit(3);
  await dist.allReduce(t);
} else {
  // Rank 1 is alive but busy elsewhere for longer than the timeout.
  if (rank === 1) await new Promise((resolve) => setTimeout(resolve, 20_000));
  await dist.allReduce(t);
}
console.log("not reached: every mode fails");
