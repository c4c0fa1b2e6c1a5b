// run: deno run -A --v8-flags=--expose-gc docs/guide/examples/06_two_nodes.ts
// expect: node 0 is 10.251.0.1 in its own network namespace, node 1 is 10.251.0.2
// expect: [rank 0] node 0, rank 0 of 4 over shm+gloo: sum 10
// expect: [rank 3] node 1, rank 3 of 4 over shm+gloo: sum 10
// expect: both launchers exited 0
// expect-match: \[rank 0\] \{"mib":1,"within":[0-9.]+,"across":[0-9.]+,"backends":\["shm","shm\+gloo"\]\}
// timeout: 45
import assert from "node:assert/strict";
import { dist, tensor, zeros } from "../../../mod.ts";

if (Deno.env.get("RANK") !== undefined) {
  // A worker, started by one node's launcher: the same code as on a real cluster.
  await dist.initProcessGroup({ backend: "gloo" });
  const rank = dist.getRank(), node = Number(Deno.env.get("GROUP_RANK"));
  const t = tensor([rank + 1]);
  await dist.allReduce(t); // 1 + 2 + 3 + 4, across both "machines"
  assert.equal(t.item(), 10);
  const backend = dist.worldGroup().backendName; // shm within a node, Gloo between the two
  console.log(`node ${node}, rank ${rank} of ${dist.getWorldSize()} over ${backend}: sum 10`);

  // Bus bandwidth of an all-reduce of MiB mebibytes, within this node and across both.
  const mib = Number(Deno.args[0] ?? "1");
  // Every rank makes every group, in the same order (as PyTorch's new_group), and uses its own.
  const nodeGroups = [await dist.newGroup([0, 1]), await dist.newGroup([2, 3])];
  const local = nodeGroups[node];
  const busbw = async (group: dist.ProcessGroup) => {
    const x = zeros([(mib << 20) / 4]);
    await dist.allReduce(x, "sum", group); // warm-up
    let best = Infinity;
    for (let i = 0; i < 5; i++) {
      await dist.barrier(group);
      const start = performance.now();
      await dist.allReduce(x, "sum", group);
      best = Math.min(best, (performance.now() - start) / 1000);
    }
    const n = group.size;
    return (2 * (n - 1) / n) * (mib << 20) / best / 1e9; // GB/s, the NCCL-tests convention
  };
  const within = await busbw(local), across = await busbw(dist.worldGroup());
  if (rank === 0) {
    console.log(JSON.stringify({ mib, within, across, backends: [local.backendName, backend] }));
  }
  await dist.destroyProcessGroup();
  Deno.exit(0);
}

// The orchestrator (needs root): two network namespaces joined by a veth pair are two machines
// with their own addresses and loopbacks. Names carry the pid so that runs side by side differ.
const ip = async (...args: string[]) => {
  const out = await new Deno.Command("ip", { args, stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`ip ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
};
const nodes = [0, 1].map((i) => ({
  ns: `dtrain-guide-${Deno.pid}-${i}`,
  iface: `g6p${Deno.pid % 100000}${i}`,
  addr: `10.251.0.${i + 1}`,
}));
try {
  for (const n of nodes) await ip("netns", "add", n.ns);
  await ip("link", "add", nodes[0].iface, "type", "veth", "peer", "name", nodes[1].iface);
  for (const n of nodes) {
    await ip("link", "set", n.iface, "netns", n.ns);
    await ip("-n", n.ns, "addr", "add", `${n.addr}/24`, "dev", n.iface);
    await ip("-n", n.ns, "link", "set", "lo", "up");
    await ip("-n", n.ns, "link", "set", n.iface, "up");
  }
  console.log(
    `node 0 is ${nodes[0].addr} in its own network namespace, node 1 is ${nodes[1].addr}`,
  );

  // The same command on both nodes, as the Terraform start-up script runs it, only --node-rank
  // differs. A multi-node job needs a shared secret of at least 32 bytes.
  const token = Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16)).join(
    "",
  );
  const launchers = nodes.map((n, rank) =>
    new Deno.Command("ip", {
      args: [
        "netns",
        "exec",
        n.ns,
        Deno.execPath(),
        "run",
        "-A",
        "--v8-flags=--expose-gc",
        "src/launch/main.ts",
        "--nnodes",
        "2",
        "--node-rank",
        String(rank),
        "--nproc-per-node",
        "2",
        "--master-addr",
        nodes[0].addr,
        "--master-port",
        "29500",
        "docs/guide/examples/06_two_nodes.ts",
        ...Deno.args, // the size in MiB, for docs/guide/figures/06_bandwidth.ts
      ],
      env: { DTRAIN_TOKEN: token },
      signal: AbortSignal.timeout(40_000),
    }).spawn()
  );
  const codes = (await Promise.all(launchers.map((p) => p.status))).map((s) => s.code);
  assert.deepEqual(codes, [0, 0]);
  console.log("both launchers exited 0");
} finally {
  // Deleting a namespace deletes the veth end inside it, and with it the pair.
  for (const n of nodes) await ip("netns", "delete", n.ns).catch(() => {});
}
