// Two nodes on one machine: two network namespaces joined by a veth pair, each with its own
// private address, and a runner that starts one command in each and kills everything left in
// them. Needs root; NETNS_SKIP says why it cannot run here. Addresses live only inside the
// namespaces made here, so nothing is ever sent outside them.

/** One namespace standing in for a node. */
export interface NetnsNode {
  /** The namespace's name (`ip netns exec NAME ...`). */
  name: string;
  /** Its veth end's address, without the prefix length. */
  address: string;
  /** Its veth end's interface name. */
  iface: string;
}

/** What one node's command did. */
export interface NodeRun {
  node: number;
  code: number;
  stdout: string;
  stderr: string;
}

/** A private test range, routed nowhere outside the namespaces. */
const SUBNET = "10.250.0";

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
 * Two namespaces, node 0 at 10.250.0.1 and node 1 at 10.250.0.2, joined by a veth pair, with
 * `lo` up in each. Disposing kills every process left in them and deletes them with the pair.
 */
export class TwoNodeNetwork implements AsyncDisposable {
  /** The namespaces made so far, and the veth ends still outside them: what disposal undoes. */
  #namespaces: string[] = [];
  #hostIfaces: string[] = [];

  private constructor(readonly nodes: readonly NetnsNode[]) {}

  /** Creates the namespaces and the pair; on failure removes whatever was made. */
  static async create(): Promise<TwoNodeNetwork> {
    const id = Deno.pid;
    const network = new TwoNodeNetwork([0, 1].map((i) => ({
      name: `dtrain-${id}-node${i}`,
      address: `${SUBNET}.${i + 1}`,
      iface: `dtv${id}n${i}`, // at most 15 characters, as the kernel requires
    })));
    const [a, b] = network.nodes;
    try {
      for (const node of network.nodes) {
        await ip("netns", "add", node.name);
        network.#namespaces.push(node.name);
      }
      await ip("link", "add", a.iface, "type", "veth", "peer", "name", b.iface);
      network.#hostIfaces.push(a.iface, b.iface);
      for (const node of network.nodes) {
        await ip("link", "set", node.iface, "netns", node.name);
        network.#hostIfaces = network.#hostIfaces.filter((iface) => iface !== node.iface);
        await ip("-n", node.name, "addr", "add", `${node.address}/24`, "dev", node.iface);
        await ip("-n", node.name, "link", "set", "lo", "up");
        await ip("-n", node.name, "link", "set", node.iface, "up");
      }
    } catch (error) {
      await network[Symbol.asyncDispose]();
      throw error;
    }
    return network;
  }

  /** The processes inside node `i`'s namespace. */
  pids(i: number): Promise<number[]> {
    return pidsIn(this.nodes[i].name);
  }

  /** SIGKILLs every process in both namespaces, until none is left (or 5 s have passed). */
  async killAll(): Promise<void> {
    const deadline = Date.now() + 5000;
    for (;;) {
      const pids = (await Promise.all(this.#namespaces.map(pidsIn))).flat();
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

  /** Kills what is left inside, then deletes both namespaces and the veth pair with them. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.killAll();
    const failures: unknown[] = [];
    const attempt = (...args: string[]) => ip(...args).catch((error) => failures.push(error));
    // Deleting one end of a veth pair deletes both; a namespace takes the end inside it along.
    if (this.#hostIfaces.length > 0) await attempt("link", "delete", this.#hostIfaces[0]);
    this.#hostIfaces = [];
    for (const name of this.#namespaces.splice(0)) await attempt("netns", "delete", name);
    if (failures.length > 0) throw failures[0];
  }

  /**
   * Runs `commands[i]` inside node i's namespace, all at once, and waits for all of them.
   * @throws Error naming the nodes still running after `timeoutMs`, once everything in both
   *   namespaces is killed.
   */
  async run(
    commands: readonly { args: string[]; env: Record<string, string> }[],
    timeoutMs: number,
  ): Promise<NodeRun[]> {
    const exited = commands.map(() => false);
    const spawned = commands.map(({ args, env }, i) =>
      new Deno.Command("ip", {
        args: ["netns", "exec", this.nodes[i].name, ...args],
        env,
        clearEnv: true,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn()
    );
    const runs = spawned.map(async (child, node): Promise<NodeRun> => {
      const [stdout, stderr, status] = await Promise.all([
        new Response(child.stdout).text(),
        new Response(child.stderr).text(),
        child.status,
      ]);
      exited[node] = true;
      return { node, code: status.code, stdout, stderr };
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), timeoutMs);
    });
    try {
      const finished = await Promise.race([Promise.all(runs), timeout]);
      if (finished !== "timeout") return finished;
      const hung = exited.flatMap((done, node) => (done ? [] : [node]));
      await this.killAll();
      const partial = await Promise.all(runs);
      throw new Error(
        `node${hung.length === 1 ? "" : "s"} ${hung.join(" and ")} still running after ` +
          `${timeoutMs} ms (hung; every process in both namespaces killed)\n` +
          partial.map((run) =>
            `node ${run.node} (${
              hung.includes(run.node) ? "hung" : `exited with ${run.code}`
            }), last lines:\n${tail(run.stdout + run.stderr)}`
          ).join("\n"),
      );
    } finally {
      clearTimeout(timer);
      await this.killAll();
      await Promise.allSettled(runs);
    }
  }
}

/** The processes inside a namespace. */
async function pidsIn(namespace: string): Promise<number[]> {
  const out = await ip("netns", "pids", namespace);
  return out.split("\n").filter((line) => line.trim() !== "").map(Number);
}

/** The last lines of a process's output, indented, for a failure message. */
export function tail(text: string, lines = 20): string {
  if (text.trim() === "") return "  (no output)";
  return text.trimEnd().split("\n").slice(-lines).map((line) => `  ${line}`).join("\n");
}
