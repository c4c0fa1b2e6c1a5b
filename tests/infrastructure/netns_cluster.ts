// Nodes of a cluster on one machine: network namespaces, each with its own private address,
// joined either by one veth pair (two nodes) or through a bridge in the root namespace (so that
// daemons on the host, such as slurmctld, reach them too), optionally each with its own host
// name (a UTS namespace per command) that every node resolves. A runner starts commands in them
// and disposal kills everything left inside. Needs root; NETNS_SKIP says why it cannot run here.
// Addresses live only inside the namespaces and the bridge made here, so nothing is ever sent
// outside them.

import { runInNamespaces } from "../_harness/namespace_runs.ts";

/** One namespace standing in for a node. */
export interface NetnsNode {
  /** The namespace's name (`ip netns exec NAME ...`). */
  name: string;
  /** Its veth end's address, without the prefix length. */
  address: string;
  /** Its veth end's interface name. */
  iface: string;
  /** Its host name, when the network gives the nodes names. */
  hostName?: string;
}

/** What one node's command did. */
export interface NodeRun {
  node: number;
  code: number;
  stdout: string;
  stderr: string;
}

/** How a network is laid out. */
export interface NetworkOptions {
  /** Nodes to make (default 2; more than 2 need `hostBridge`). */
  nodes?: number;
  /** The third byte of the private range 10.250.X.0/24, which also tags the names (default 0). */
  subnet?: number;
  /** Join the nodes through a bridge in the root namespace, which gets the address `.254`. */
  hostBridge?: boolean;
  /**
   * Give node i the host name `${hostNamePrefix}${i}`: commands run in their own UTS namespace
   * with that name, and every node resolves every name (and the host's own) through
   * /etc/netns/NAME/hosts, which `ip netns exec` puts over /etc/hosts.
   */
  hostNamePrefix?: string;
}
/** Runs `ip` with `args`; throws with its stderr when it fails. */
async function ip(...args: string[]): Promise<string> {
  const output = await new Deno.Command("ip", { args, stdout: "piped", stderr: "piped" })
    .output();
  const decoder = new TextDecoder();
  if (!output.success) {
    throw new Error(`ip ${args.join(" ")}: ${decoder.decode(output.stderr).trim()}`);
  }
  return decoder.decode(output.stdout);
}

/** Why network namespaces cannot be made here (not root, no iproute2, refused), or null. */
export const NETNS_SKIP: string | null = (() => {
  if (Deno.uid() !== 0) return "needs root to create network namespaces";
  const probe = `dtrain-probe-${Deno.pid}`;
  let added;
  try {
    added = new Deno.Command("ip", { args: ["netns", "add", probe], stderr: "piped" })
      .outputSync();
  } catch {
    return "iproute2's `ip` is not installed (apt-get install -y iproute2)";
  }
  if (!added.success) {
    return `\`ip netns add\` failed: ${new TextDecoder().decode(added.stderr).trim()}`;
  }
  new Deno.Command("ip", { args: ["netns", "delete", probe], stderr: "null" }).outputSync();
  return null;
})();

/**
 * Network namespaces, node i at 10.250.X.(i+1), with `lo` up in each. Disposing kills every
 * process left in them and deletes them with their links, the bridge and the hosts files.
 */
export class NodeNetwork implements AsyncDisposable {
  /** What disposal undoes: namespaces, links still in the root namespace, /etc/netns folders. */
  #namespaces: string[] = [];
  #hostIfaces: string[] = [];
  #hostsDirs: string[] = [];

  private constructor(
    readonly nodes: readonly NetnsNode[],
    /** The root namespace's address on the bridge, or null without one. */
    readonly hostAddress: string | null,
  ) {}

  /** Creates the namespaces and their links; on failure removes whatever was made. */
  static async create(options: NetworkOptions = {}): Promise<NodeNetwork> {
    const { nodes: count = 2, subnet = 0, hostBridge = false, hostNamePrefix } = options;
    if (count < 1 || (!hostBridge && count !== 2)) {
      throw new Error(`NodeNetwork: ${count} nodes need hostBridge (a veth pair joins exactly 2)`);
    }
    // Interface names: at most 15 characters, as the kernel requires.
    const tag = `dt${Deno.pid}${subnet === 0 ? "" : `s${subnet}`}`;
    const prefix = `10.250.${subnet}`;
    const network = new NodeNetwork(
      Array.from({ length: count }, (_, i) => ({
        name: `dtrain-${Deno.pid}-${subnet}-node${i}`,
        address: `${prefix}.${i + 1}`,
        iface: `${tag}n${i}`,
        ...(hostNamePrefix === undefined ? {} : { hostName: `${hostNamePrefix}${i}` }),
      })),
      hostBridge ? `${prefix}.254` : null,
    );
    try {
      for (const node of network.nodes) {
        await ip("netns", "add", node.name);
        network.#namespaces.push(node.name);
      }
      if (hostBridge) {
        const bridge = `${tag}br`;
        await ip("link", "add", bridge, "type", "bridge");
        network.#hostIfaces.push(bridge);
        await ip("addr", "add", `${network.hostAddress}/24`, "dev", bridge);
        await ip("link", "set", bridge, "up");
        for (const [i, node] of network.nodes.entries()) {
          // The host end goes with the namespace that holds its peer.
          await ip("link", "add", node.iface, "type", "veth", "peer", "name", `${tag}h${i}`);
          network.#hostIfaces.push(node.iface);
          await ip("link", "set", `${tag}h${i}`, "master", bridge);
          await ip("link", "set", `${tag}h${i}`, "up");
        }
      } else {
        const [a, b] = network.nodes;
        await ip("link", "add", a.iface, "type", "veth", "peer", "name", b.iface);
        network.#hostIfaces.push(a.iface, b.iface);
      }
      for (const node of network.nodes) {
        await ip("link", "set", node.iface, "netns", node.name);
        network.#hostIfaces = network.#hostIfaces.filter((iface) => iface !== node.iface);
        await ip("-n", node.name, "addr", "add", `${node.address}/24`, "dev", node.iface);
        await ip("-n", node.name, "link", "set", "lo", "up");
        await ip("-n", node.name, "link", "set", node.iface, "up");
      }
      if (hostNamePrefix !== undefined) await network.#writeHosts();
    } catch (error) {
      await network[Symbol.asyncDispose]();
      throw error;
    }
    return network;
  }

  /** Every node's name and, with a bridge, the host's own, in each namespace's /etc/hosts. */
  async #writeHosts(): Promise<void> {
    const lines = ["127.0.0.1 localhost"];
    for (const node of this.nodes) lines.push(`${node.address} ${node.hostName}`);
    if (this.hostAddress !== null) lines.push(`${this.hostAddress} ${Deno.hostname()}`);
    for (const node of this.nodes) {
      const dir = `/etc/netns/${node.name}`;
      await Deno.mkdir(dir, { recursive: true });
      this.#hostsDirs.push(dir);
      await Deno.writeTextFile(`${dir}/hosts`, lines.join("\n") + "\n");
    }
  }

  /**
   * The command line that runs `args` inside node `i`: in its network namespace and, when the
   * nodes have names, in a UTS namespace of its own carrying the node's host name.
   */
  commandLine(i: number, args: readonly string[]): string[] {
    const node = this.nodes[i];
    const named = node.hostName === undefined ? [] : [
      "unshare",
      "--uts",
      "--",
      "sh",
      "-c",
      'hostname "$0" && exec "$@"',
      node.hostName,
    ];
    return ["ip", "netns", "exec", node.name, ...named, ...args];
  }

  /** The processes inside node `i`'s namespace. */
  pids(i: number): Promise<number[]> {
    return pidsIn(this.nodes[i].name);
  }

  /** SIGKILLs every process in all namespaces, until none is left (or 5 s have passed). */
  killAll(): Promise<void> {
    return killIn(this.#namespaces);
  }

  /** SIGKILLs every process in node `i`'s namespace: the node dies, its network stays. */
  killNode(i: number): Promise<void> {
    return killIn([this.nodes[i].name]);
  }

  /** Kills what is left inside, then deletes the namespaces, their links and hosts files. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.killAll();
    const failures: unknown[] = [];
    const attempt = (...args: string[]) => ip(...args).catch((error) => failures.push(error));
    // Deleting one end of a veth pair deletes both; a namespace takes the pairs it holds along.
    for (const name of this.#namespaces.splice(0)) await attempt("netns", "delete", name);
    for (const iface of this.#hostIfaces.splice(0)) {
      if ((await ip("link", "show").catch(() => "")).includes(` ${iface}:`)) {
        await attempt("link", "delete", iface);
      }
    }
    for (const dir of this.#hostsDirs.splice(0)) {
      await Deno.remove(dir, { recursive: true }).catch((error) => failures.push(error));
    }
    if (failures.length > 0) throw failures[0];
  }

  /**
   * Runs `commands[i]` inside node i's namespace, all at once, and waits for all of them.
   * @throws Error naming the nodes still running after `timeoutMs`, once everything in the
   *   namespaces is killed.
   */
  async run(
    commands: readonly { args: string[]; env: Record<string, string> }[],
    timeoutMs: number,
  ): Promise<NodeRun[]> {
    try {
      const ends = await runInNamespaces(
        commands.map(({ args, env }, i) => ({ ipArgs: this.commandLine(i, args).slice(1), env })),
        timeoutMs,
        () => this.killAll(),
        (node) => `node ${node}`,
      );
      return ends.map((end, node) => ({ node, ...end }));
    } finally {
      await this.killAll();
    }
  }
}

/** SIGKILLs every process in the namespaces, until none is left (or 5 s have passed). */
export async function killIn(namespaces: readonly string[]): Promise<void> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const pids = (await Promise.all(namespaces.map(pidsIn))).flat();
    if (pids.length === 0 || Date.now() > deadline) return;
    for (const pid of pids) {
      try {
        Deno.kill(pid, "SIGKILL");
      } catch {
        // exited since it was listed
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The processes inside a namespace. */
export async function pidsIn(namespace: string): Promise<number[]> {
  const out = await ip("netns", "pids", namespace);
  return out.split("\n").filter((line) => line.trim() !== "").map(Number);
}

export { tail } from "../_harness/namespace_runs.ts";
