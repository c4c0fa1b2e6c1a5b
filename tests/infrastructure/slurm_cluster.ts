// A real SLURM cluster on one machine: munged and slurmctld in the root namespace, and one slurmd
// per node, each in its own network and UTS namespace (a NodeNetwork with a host bridge), with
// Debian's slurm-wlm and munge. Everything lives in one temporary folder (key, configuration,
// state, logs); disposal stops every daemon and job step and removes the folder.
import { type NodeNetwork, tail } from "./netns_cluster.ts";

/** The programs a cluster needs, from Debian's slurm-wlm (slurmctld, slurmd, slurm-client) and munge. */
export const SLURM_PROGRAMS = ["munged", "slurmctld", "slurmd", "sbatch", "scontrol"];

/** The programs of SLURM_PROGRAMS that are not on PATH. */
export function missingSlurmPrograms(): string[] {
  const path = (Deno.env.get("PATH") ?? "").split(":").concat("/usr/sbin", "/sbin");
  return SLURM_PROGRAMS.filter((name) =>
    !path.some((dir) => {
      try {
        return Deno.statSync(`${dir}/${name}`).isFile;
      } catch {
        return false;
      }
    })
  );
}

/** A job as `scontrol show job -o` describes it: JobState, Restarts, ExitCode, NodeList... */
export type JobInfo = Record<string, string>;

/** Job states after which a job runs no more. */
const FINISHED = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OOM"]);

/** How long the controller waits on a silent slurmd before it marks the node down (seconds). */
export const SLURMD_TIMEOUT_S = 5;

/** One temporary SLURM cluster over the nodes of a network. */
export class SlurmCluster implements AsyncDisposable {
  /** The daemons in the root namespace, each the leader of its own process group. */
  #daemons: { name: string; child: Deno.ChildProcess }[] = [];
  #slurmds = new Map<number, Deno.ChildProcess>();

  private constructor(
    readonly network: NodeNetwork,
    /** The cluster's folder: configuration, state and logs. */
    readonly dir: string,
    /** The environment every SLURM command of this cluster runs with (SLURM_CONF). */
    readonly env: Record<string, string>,
  ) {}

  /**
   * Starts munged, slurmctld and one slurmd per node, and waits until every node is idle.
   * @param network nodes with a host bridge and host names.
   * @param cpus CPUs each node offers.
   */
  static async create(network: NodeNetwork, cpus: number): Promise<SlurmCluster> {
    if (network.hostAddress === null || network.nodes.some((node) => !node.hostName)) {
      throw new Error("SlurmCluster: the network needs a host bridge and host names");
    }
    const dir = await Deno.makeTempDir({ prefix: "dtrain-slurm-" });
    const conf = `${dir}/slurm.conf`;
    const cluster = new SlurmCluster(network, dir, {
      PATH: `${Deno.env.get("PATH") ?? "/usr/bin:/bin"}:/usr/sbin:/sbin`,
      SLURM_CONF: conf,
    });
    try {
      for (const sub of ["munge", "ctld", ...network.nodes.map((node) => node.hostName!)]) {
        await Deno.mkdir(`${dir}/${sub}`, { mode: 0o700 });
      }
      const key = crypto.getRandomValues(new Uint8Array(128));
      await Deno.writeFile(`${dir}/munge/munge.key`, key, { mode: 0o400 });
      await Deno.writeTextFile(conf, slurmConf(dir, network, cpus, freePort()));
      await Deno.writeTextFile(`${dir}/cgroup.conf`, cgroupConf());
      cluster.#startDaemon("munged", [
        "munged",
        "--foreground",
        "--force",
        `--key-file=${dir}/munge/munge.key`,
        `--socket=${dir}/munge/socket`,
        `--pid-file=${dir}/munge/munged.pid`,
        `--log-file=${dir}/munge/munged.log`,
        `--seed-file=${dir}/munge/munged.seed`,
      ]);
      // munged is up once its socket exists; slurmctld's first call needs it.
      await cluster.waitFor(
        "munged's socket",
        10_000,
        () => Promise.resolve(exists(`${dir}/munge/socket`)),
      );
      cluster.#startDaemon("slurmctld", ["slurmctld", "-D", "-i", "-f", conf]);
      for (const i of network.nodes.keys()) cluster.startSlurmd(i);
      await cluster.waitForNodes("idle", 30_000);
    } catch (error) {
      await cluster[Symbol.asyncDispose]();
      throw error;
    }
    return cluster;
  }

  /** Starts node `i`'s slurmd, in its namespaces. */
  startSlurmd(i: number): void {
    const args = this.network.commandLine(i, ["slurmd", "-D", "-f", this.env.SLURM_CONF]);
    this.#slurmds.set(
      i,
      new Deno.Command(args[0], {
        args: args.slice(1),
        env: this.env,
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn(),
    );
  }

  /** The node dies: its slurmd, job steps and every other process in its namespace are killed. */
  async killNode(i: number): Promise<void> {
    await this.network.killNode(i);
    await this.#slurmds.get(i)?.status;
  }

  /**
   * Runs a SLURM command of this cluster; throws with its output when it fails, and kills it
   * after 30 s (a controller that stopped answering).
   */
  async command(args: string[], env: Record<string, string> = {}): Promise<string> {
    const output = await new Deno.Command(args[0], {
      args: args.slice(1),
      env: { ...this.env, ...env },
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(30_000),
    }).output();
    const decoder = new TextDecoder();
    if (!output.success) {
      throw new Error(
        `${args.join(" ")} exited with ${output.code}: ${decoder.decode(output.stderr).trim()}`,
      );
    }
    return decoder.decode(output.stdout);
  }

  /** Submits a batch script; `env` is the job's whole environment (with this cluster's). */
  async sbatch(args: string[], env: Record<string, string>): Promise<number> {
    const out = await this.command(["sbatch", "--parsable", ...args], env);
    const id = Number(out.trim().split(";")[0]);
    if (!Number.isInteger(id)) throw new Error(`sbatch printed ${JSON.stringify(out)}`);
    return id;
  }

  /** What the controller knows of a job. */
  async job(id: number): Promise<JobInfo> {
    const line = await this.command(["scontrol", "show", "job", "-o", String(id)]);
    const info: JobInfo = {};
    for (const field of line.trim().split(/\s+/)) {
      const at = field.indexOf("=");
      if (at > 0) info[field.slice(0, at)] = field.slice(at + 1);
    }
    return info;
  }

  /** Waits until a job has finished, and returns what the controller says of it. */
  async waitForJobEnd(id: number, timeoutMs: number, output: string): Promise<JobInfo> {
    let info: JobInfo = {};
    await this.waitFor(`job ${id} to finish`, timeoutMs, async () => {
      info = await this.job(id);
      return FINISHED.has(info.JobState);
    }, async () => `job ${id}: ${JSON.stringify(info)}\n${tail(await readOr(output))}`);
    return info;
  }

  /** The host names a SLURM node list stands for (`dtrain-node[0-1]` is two). */
  async hostnames(nodeList: string): Promise<string[]> {
    const out = await this.command(["scontrol", "show", "hostnames", nodeList]);
    return out.trim().split("\n");
  }

  /** Waits until the named nodes (default: all) are in `state` (as sinfo says: idle, down...). */
  async waitForNodes(
    state: string,
    timeoutMs: number,
    names = this.network.nodes.map((node) => node.hostName!),
  ): Promise<void> {
    let states = "";
    await this.waitFor(`${names.join(", ")} ${state}`, timeoutMs, async () => {
      states = await this.command(["sinfo", "--noheader", "--node", names.join(","), "-o", "%T"]);
      return states.trim().split("\n").every((line) => line.replace(/[*~#!%$@^-]+$/, "") === state);
    }, () => Promise.resolve(`node states: ${states.trim().replaceAll("\n", ", ")}`));
  }

  /**
   * Polls `ready` every 100 ms until it holds.
   * @throws Error naming `what`, with `explain()`'s account, after `timeoutMs`.
   */
  async waitFor(
    what: string,
    timeoutMs: number,
    ready: () => Promise<boolean>,
    explain: () => Promise<string> = () => Promise.resolve(""),
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!await ready()) {
      if (Date.now() > deadline) {
        throw new Error(
          `waited ${timeoutMs} ms for ${what}; ${await explain()}\n` +
            `slurmctld log:\n${tail(await readOr(`${this.dir}/ctld/slurmctld.log`))}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Stops every job step and daemon (SIGKILL in the namespaces, then the host's daemons). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.network.killAll();
    await Promise.allSettled([...this.#slurmds.values()].map((child) => child.status));
    for (const { child } of this.#daemons.splice(0).reverse()) {
      // Each daemon leads its own process group: slurmctld's helper (slurmscriptd) goes too.
      for (const signal of ["SIGTERM", "SIGKILL"] as const) {
        try {
          Deno.kill(-child.pid, signal);
        } catch {
          // the group is gone
        }
        const exited = await Promise.race([
          child.status.then(() => true),
          new Promise<false>((resolve) => setTimeout(() => resolve(false), 5000)),
        ]);
        if (exited) break;
      }
    }
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }

  /** Starts a daemon in the foreground, in a process group of its own (setsid). */
  #startDaemon(name: string, args: string[]): void {
    const child = new Deno.Command("setsid", {
      args,
      env: this.env,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    this.#daemons.push({ name, child });
  }
}

/**
 * The cluster's slurm.conf: everything under `dir`, root runs the daemons, no cgroup process
 * tracking or accounting (nothing to set up on the host), and a short slurmd timeout so that a
 * node that dies is found down within seconds.
 */
function slurmConf(dir: string, network: NodeNetwork, cpus: number, port: number): string {
  return [
    "ClusterName=dtraintest",
    `SlurmctldHost=${Deno.hostname()}(${network.hostAddress})`,
    `SlurmctldPort=${port}`,
    "SlurmdPort=6818", // inside each node's namespace
    "AuthType=auth/munge",
    "CredType=cred/munge",
    `AuthInfo=socket=${dir}/munge/socket`,
    "SlurmUser=root",
    "SlurmdUser=root",
    `StateSaveLocation=${dir}/ctld`,
    `SlurmctldPidFile=${dir}/ctld/slurmctld.pid`,
    `SlurmctldLogFile=${dir}/ctld/slurmctld.log`,
    `SlurmdSpoolDir=${dir}/%n`,
    `SlurmdPidFile=${dir}/%n/slurmd.pid`,
    `SlurmdLogFile=${dir}/%n/slurmd.log`,
    "ProctrackType=proctrack/linuxproc",
    "TaskPlugin=task/none",
    "JobAcctGatherType=jobacct_gather/none",
    "SwitchType=switch/none",
    "MpiDefault=none",
    "SchedulerType=sched/builtin",
    "SelectType=select/cons_tres",
    "SelectTypeParameters=CR_CPU",
    // The nodes share this machine's CPUs: take the configured count as given.
    "SlurmdParameters=config_overrides",
    // A node that comes back registers and is used again.
    "ReturnToService=2",
    `SlurmdTimeout=${SLURMD_TIMEOUT_S}`,
    "MessageTimeout=5",
    ...network.nodes.map((node) =>
      `NodeName=${node.hostName} NodeAddr=${node.address} CPUs=${cpus} State=UNKNOWN`
    ),
    `PartitionName=dtrain Nodes=${
      network.nodes.map((n) => n.hostName).join(",")
    } Default=YES MaxTime=UNLIMITED State=UP`,
    "",
  ].join("\n");
}

/** slurmd always loads a cgroup plugin; name the hierarchy this machine mounts. */
function cgroupConf(): string {
  const v2 = exists("/sys/fs/cgroup/cgroup.controllers");
  return `CgroupPlugin=cgroup/${
    v2 ? "v2" : "v1"
  }\nCgroupMountpoint=/sys/fs/cgroup\nIgnoreSystemd=yes\n`;
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

async function readOr(path: string): Promise<string> {
  return await Deno.readTextFile(path).catch((error) => `(${path}: ${error.message})`);
}

/** A port nothing on the host listens on (one just freed). */
function freePort(): number {
  const listener = Deno.listen({ hostname: "0.0.0.0", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}
