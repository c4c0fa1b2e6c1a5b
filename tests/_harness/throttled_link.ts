/**
 * Two hosts joined by a slow, distant link, on one machine: network namespaces A and B, each
 * with one veth whose egress `tc tbf` limits (100 Mbit/s by default), both cabled to a third
 * namespace, the router, where delay_bridge.c holds every frame 25 ms (by default) before
 * passing it to the other side. The kernel here has no netem, so the delay is a user-space
 * bridge; it works on Ethernet frames, so everything the hosts exchange crosses it (the store's
 * connection, Gloo's pair connections on the ports they pick, ARP) and programs need no relay
 * address. Round trip: twice the delay. Needs root, `tc` and a C compiler: LINK_SKIP says why
 * not.
 *
 * Nothing outlives a link: disposal kills every process in the namespaces and deletes them, and
 * a watchdog in its own session does the same if the process that made the link dies first
 * (a test runner's hard timeout), as does the bridge, which exits when its stdin closes.
 * @module
 */

import { fileURLToPath } from "node:url";
import { killIn, NETNS_SKIP, pidsIn, tail } from "../infrastructure/netns_cluster.ts";
import { awaitLine, hostEnv, run, which } from "./link_commands.ts";
import { runInNamespaces } from "./namespace_runs.ts";

const BRIDGE_SOURCE = fileURLToPath(new URL("./delay_bridge.c", import.meta.url));
const PROBE = fileURLToPath(new URL("./link_probe.ts", import.meta.url));
/** The port link_probe listens on in host B (namespaces are private, so it never clashes). */
const PROBE_PORT = 5201;

/** One end of the link. */
export interface LinkHost {
  /** The namespace's name (`ip netns exec NAME ...`). */
  name: string;
  /** Its address, without the prefix length. */
  address: string;
  /** Its interface, the one `tbf` limits. */
  iface: string;
}

/** How the link is made. */
export interface ThrottledLinkOptions {
  /** Each direction's rate in Mbit/s, enforced by `tbf` at each host's egress (default 100). */
  rateMbit?: number;
  /** Milliseconds every frame is held in each direction (default 25: a 50 ms round trip). */
  delayMs?: number;
}

/** What one command on a host did. */
export interface HostRun {
  host: number;
  code: number;
  stdout: string;
  stderr: string;
}

/** A command for `run`: its host (0 is A, 1 is B), argument vector and whole environment. */
export interface HostCommand {
  host: 0 | 1;
  args: string[];
  env: Record<string, string>;
}

/** Why a throttled link cannot be made here (not root, no `tc`, C compiler or `setsid`), or null. */
export const LINK_SKIP: string | null = NETNS_SKIP ??
  (!which("tc") ? "iproute2's `tc` is not installed" : null) ??
  (!which("cc") ? "no C compiler (`cc`) to build the delaying bridge" : null) ??
  (!which("setsid") ? "util-linux's `setsid` (for the cleanup watchdog) is not installed" : null);

/** Links made by this process, so that two at once get distinct names and subnets. */
let serial = 0;

/**
 * Hosts A (10.251.N.1) and B (10.251.N.2) behind a rate limit and a delay. `await using` it:
 * disposal removes the namespaces and every process in them.
 */
export class ThrottledLink implements AsyncDisposable {
  readonly #namespaces: string[] = [];
  readonly #tempDir: string;
  #bridge: Deno.ChildProcess | null = null;
  #bridgeLog: Promise<string> | null = null;
  #watchdog: Deno.ChildProcess | null = null;
  #probeServer: Promise<void> | null = null;
  /** Resolves once the probe server has exited and its output has been read. */
  #probeServerDone: Promise<unknown> = Promise.resolve();

  private constructor(
    /** Host A (index 0) and host B (index 1). */
    readonly hosts: readonly [LinkHost, LinkHost],
    /** The namespace of the router, where the delaying bridge runs. */
    readonly router: string,
    /** Each direction's rate, Mbit/s. */
    readonly rateMbit: number,
    /** Each direction's delay, ms. */
    readonly delayMs: number,
    tempDir: string,
  ) {
    this.#tempDir = tempDir;
  }

  /**
   * Makes the namespaces, the cables, the rate limits and the bridge; on failure removes
   * whatever was made.
   * @throws Error naming the step that failed (an `ip` or `tc` command, the compiler, the bridge).
   */
  static async create(options: ThrottledLinkOptions = {}): Promise<ThrottledLink> {
    const { rateMbit = 100, delayMs = 25 } = options;
    const n = serial++;
    // Interface names: at most 15 characters, as the kernel requires.
    const tag = `tl${Deno.pid}${n === 0 ? "" : `x${n}`}`;
    const hosts = (["a", "b"] as const).map((side, i) => ({
      name: `dtrain-${Deno.pid}-link${n}-${side}`,
      address: `10.251.${n % 256}.${i + 1}`,
      iface: `${tag}${side}`,
    })) as [LinkHost, LinkHost];
    const tempDir = await Deno.makeTempDir({ prefix: "dtrain-link-" });
    const link = new ThrottledLink(
      hosts,
      `dtrain-${Deno.pid}-link${n}-r`,
      rateMbit,
      delayMs,
      tempDir,
    );
    try {
      await link.#build(tag);
    } catch (error) {
      await link[Symbol.asyncDispose]();
      throw error;
    }
    return link;
  }

  async #build(tag: string): Promise<void> {
    const bridgeBinary = `${this.#tempDir}/delay_bridge`;
    await run("cc", ["-O2", "-std=c11", "-Wall", "-o", bridgeBinary, BRIDGE_SOURCE]);
    const names = [...this.hosts.map((h) => h.name), this.router];
    this.#startWatchdog(names);
    for (const name of names) {
      await run("ip", ["netns", "add", name]);
      this.#namespaces.push(name);
      await run("ip", ["-n", name, "link", "set", "lo", "up"]);
    }
    const routerPorts = [`${tag}ra`, `${tag}rb`];
    for (const [i, host] of this.hosts.entries()) {
      // Made inside the host's namespace, so that deleting the namespaces deletes the cable.
      await run("ip", [
        ...["-n", host.name, "link", "add", host.iface, "type", "veth"],
        ...["peer", "name", routerPorts[i], "netns", this.router],
      ]);
      await run("ip", ["-n", host.name, "addr", "add", `${host.address}/24`, "dev", host.iface]);
      await run("ip", ["-n", host.name, "link", "set", host.iface, "up"]);
      await run("ip", ["-n", this.router, "link", "set", routerPorts[i], "up"]);
      // The burst holds one offloaded 64 KiB frame; the queue about 80 ms at 100 Mbit/s.
      await run("ip", [
        ...["netns", "exec", host.name, "tc", "qdisc", "add", "dev", host.iface, "root", "tbf"],
        ...["rate", `${this.rateMbit}mbit`, "burst", "64kb", "limit", "1mb"],
      ]);
    }
    this.#bridge = new Deno.Command("ip", {
      args: ["netns", "exec", this.router, bridgeBinary, ...routerPorts, String(this.delayMs)],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#bridgeLog = new Response(this.#bridge.stderr).text();
    const { drained } = await awaitLine(this.#bridge.stdout, "ready", "delay_bridge");
    drained.catch(() => {});
  }

  /**
   * A shell in its own session (so that a signal to the test's process group spares it) whose
   * stdin is this process: when this process dies, it kills what is in the namespaces and
   * deletes them. After a clean disposal it finds nothing to do.
   */
  #startWatchdog(names: string[]): void {
    const script = [
      "cat >/dev/null",
      `for ns in ${names.join(" ")}; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9; done`,
      "sleep 0.2",
      `for ns in ${names.join(" ")}; do ip netns delete "$ns" 2>/dev/null; done`,
      `rm -rf '${this.#tempDir}'`,
      "exit 0",
    ].join("\n");
    this.#watchdog = new Deno.Command("setsid", {
      args: ["sh", "-c", script],
      stdin: "piped",
      stdout: "null",
      stderr: "null",
    }).spawn();
  }

  /** The command line that runs `args` on host `host` (0 is A, 1 is B). */
  commandLine(host: 0 | 1, args: readonly string[]): string[] {
    return ["ip", "netns", "exec", this.hosts[host].name, ...args];
  }

  /** The processes on host `host`. */
  pids(host: 0 | 1): Promise<number[]> {
    return pidsIn(this.hosts[host].name);
  }

  /**
   * The bytes host `host` has sent onto the link so far (its interface's counter: every frame,
   * headers and retransmissions included).
   */
  async txBytes(host: 0 | 1): Promise<number> {
    const { name, iface } = this.hosts[host];
    const [stats] = JSON.parse(await run("ip", ["-n", name, "-s", "-j", "link", "show", iface]));
    return Number(stats.stats64.tx.bytes);
  }

  /** SIGKILLs every process on both hosts (the bridge, in the router, stays). */
  killHosts(): Promise<void> {
    return killIn(this.hosts.map((h) => h.name));
  }

  /**
   * Runs `deno run -A ARGS` as rank 0 on host A and rank 1 on host B, rank 0's host as MASTER and
   * one fresh DTRAIN_TOKEN, with `env` besides; see {@linkcode ThrottledLink.run}.
   */
  runRanks(args: string[], env: Record<string, string>, timeoutMs: number): Promise<HostRun[]> {
    const token = crypto.randomUUID(), master = this.hosts[0].address;
    return this.run(
      ([0, 1] as const).map((rank) => ({
        host: rank,
        args: [Deno.execPath(), "run", "-A", ...args],
        env: hostEnv({ ...env, RANK: String(rank), MASTER: master, DTRAIN_TOKEN: token }),
      })),
      timeoutMs,
    );
  }

  /**
   * Runs the commands, each on its host, all at once, and waits for all of them.
   * @throws Error naming the commands still running after `timeoutMs`, once everything on the
   *   hosts is killed.
   */
  async run(commands: readonly HostCommand[], timeoutMs: number): Promise<HostRun[]> {
    const ends = await runInNamespaces(
      commands.map(({ host, args, env }) => ({
        ipArgs: this.commandLine(host, args).slice(1),
        env,
      })),
      timeoutMs,
      () => this.killHosts(),
      (i) => `command ${i} on host ${commands[i].host}`,
    );
    return ends.map((end, i) => ({ host: commands[i].host, ...end }));
  }

  /** Starts link_probe's server on host B once; resolves when it listens. */
  #probe(): Promise<void> {
    this.#probeServer ??= (async () => {
      const server = new Deno.Command("ip", {
        args: this.commandLine(1, [Deno.execPath(), "run", "-A", PROBE, "serve", `${PROBE_PORT}`])
          .slice(1),
        env: hostEnv(),
        clearEnv: true,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      // It runs until disposal kills it; its output is drained so that it never blocks.
      const stderr = new Response(server.stderr).text();
      this.#probeServerDone = Promise.allSettled([server.status, stderr]);
      const { drained } = await awaitLine(server.stdout, "listening", "link_probe serve");
      this.#probeServerDone = Promise.allSettled([server.status, stderr, drained]);
    })();
    return this.#probeServer;
  }

  /** Runs link_probe's client on host A against the server on B; its JSON line. */
  async #probeClient(args: string[]): Promise<Record<string, unknown>> {
    await this.#probe();
    const [result] = await this.run([{
      host: 0,
      args: [Deno.execPath(), "run", "-A", PROBE, args[0], this.hosts[1].address, `${PROBE_PORT}`]
        .concat(args.slice(1)),
      env: hostEnv(),
    }], 60_000);
    if (result.code !== 0) {
      throw new Error(`link_probe ${args[0]} failed:\n${tail(result.stdout + result.stderr)}`);
    }
    return JSON.parse(result.stdout.trim().split("\n").at(-1)!);
  }

  /**
   * Measures the round trip from A to B and back: the median of `samples` one-byte TCP
   * exchanges on one connection (no delayed ACKs: both ends set TCP_NODELAY), in ms.
   */
  async rttMs(samples = 15): Promise<number> {
    const { rttMs } = await this.#probeClient(["rtt", String(samples)]) as { rttMs: number[] };
    const sorted = rttMs.toSorted((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)];
  }

  /**
   * Measures the rate from A to B over one TCP connection sending `bytes`, in Mbit/s of TCP
   * payload, counted by the receiver once the first quarter has arrived (past slow start).
   */
  async bandwidthMbit(bytes = 16_000_000): Promise<number> {
    const { mbit } = await this.#probeClient(["bandwidth", String(bytes)]) as { mbit: number };
    return mbit;
  }

  /**
   * Kills every process in the namespaces, stops the bridge, deletes the namespaces (their
   * cables go with them) and the built bridge.
   * @returns The bridge's closing line (frames forwarded and dropped), or "" when it never ran.
   */
  async close(): Promise<string> {
    await killIn(this.#namespaces.filter((name) => name !== this.router));
    let bridgeLog = "";
    if (this.#bridge !== null) {
      await this.#bridge.stdin.close().catch(() => {});
      const stopped = await Promise.race([
        this.#bridge.status,
        new Promise<null>((resolve) => setTimeout(resolve, 2000, null)),
      ]);
      if (stopped === null) this.#bridge.kill("SIGKILL");
      await this.#bridge.status;
      bridgeLog = (await this.#bridgeLog!).trim();
      this.#bridge = null;
    }
    await killIn(this.#namespaces);
    const failures: unknown[] = [];
    for (const name of this.#namespaces.splice(0)) {
      await run("ip", ["netns", "delete", name]).catch((error) => failures.push(error));
    }
    await Deno.remove(this.#tempDir, { recursive: true }).catch(() => {});
    if (this.#watchdog !== null) {
      await this.#watchdog.stdin.close().catch(() => {});
      await this.#watchdog.status;
      this.#watchdog = null;
    }
    await this.#probeServer?.catch(() => {});
    await this.#probeServerDone;
    if (failures.length > 0) throw failures[0];
    return bridgeLog;
  }

  /** {@linkcode close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
