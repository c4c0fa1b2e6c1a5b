// run: deno run -A --v8-flags=--expose-gc docs/guide/examples/04_elastic.ts
// expect-match: launch: round 0: node \d of 2 \(world size 2\)
// expect: node B killed (SIGKILL) after: [rank 0] epoch 0 (epoch 1 at sample 256): snapshot
// expect-match: launch: round 0 failed \(.*\); restarting with the nodes that are up \(restart 1/1 of the job\)
// expect-match: launch: round 1: node 0 of 1 \(world size 1\)
// expect-match: \[rank 0\] resuming from \S+ at epoch \d, sample \d+ \(world size 1\)
// expect: node A: exit 0, done: 3 epochs
import assert from "node:assert/strict";

// Two "nodes" on this machine: two launchers of an elastic job (--nnodes 1:2), one process each,
// meeting at node A's store. Node B is killed after the first mid-epoch snapshot; node A's round
// fails, it meets the nodes that are up (itself) and resumes the job from the snapshot, alone.
const dir = await Deno.makeTempDir({ prefix: "guide_elastic_" });
const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
const port = String(listener.addr.port);
listener.close();
const job = [
  ...["--dataset", "synthetic", "--model", "mlp", "--hidden", "16", "--batch-size", "32"],
  ...["--epochs", "3", "--save-every-steps", "4", "--snapshot", `${dir}/snapshot.safetensors`],
];
function node(rank: number): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      ...["run", "-A", "--v8-flags=--expose-gc", "src/launch/main.ts", "--nnodes", "1:2"],
      ...["--node-rank", String(rank), "--nproc-per-node", "1", "--master-port", port],
      ...["--max-restarts", "1", "src/train/main.ts", ...job],
    ],
    env: { NO_COLOR: "1", DTRAIN_TOKEN: "a shared secret of at least 32 bytes, for the guide" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}
const a = node(0), b = node(1);

/** Collects a process's lines, calling `onLine` on each as it arrives. */
async function lines(stream: ReadableStream<Uint8Array>, onLine: (l: string) => void) {
  const all: string[] = [];
  let rest = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    const parts = (rest + chunk).split("\n");
    rest = parts.pop()!;
    for (const l of parts) all.push(l), onLine(l);
  }
  return all;
}
let killed = false;
const onA = (l: string) => {
  if (!killed && /at sample \d+\): snapshot saved/.test(l)) {
    killed = true;
    b.kill("SIGKILL");
    console.log(`node B killed (SIGKILL) after: ${l.replace(/ saved to .*/, "")}`);
  }
  if (/^launch: round|resuming from|done:|DistError/.test(l.replace(/^\[rank \d\] /, "launch: "))) {
    console.log(l);
  }
};
const [aOut, aErr] = await Promise.all([lines(a.stdout, onA), lines(a.stderr, onA)]);
await Promise.all([lines(b.stdout, () => {}), lines(b.stderr, () => {})]);
const [sa, sb] = await Promise.all([a.status, b.status]);
assert.ok(killed, `node B was never killed:\n${[...aOut, ...aErr].join("\n")}`);
assert.equal(sb.signal, "SIGKILL");
const done = aOut.concat(aErr).find((l) => l.includes("done:"));
console.log(`node A: exit ${sa.code}, ${done?.replace(/^\[rank \d\] /, "")}`);
assert.equal(sa.code, 0);
await Deno.remove(dir, { recursive: true });
