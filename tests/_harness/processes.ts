/**
 * Runs dtrain's entry points (the launcher, the train job, DDP workers) as real processes for the
 * launch, train and parallel tests. Every run puts a unique marker in its environment, which workers inherit, so the
 * whole process tree can be found in /proc: a hard timeout kills all of it and names what hung,
 * and what is still alive after the run is reported, then killed, so nothing outlives a test.
 * @module
 */

import { fileURLToPath } from "node:url";
import { collectLines } from "./lines.ts";

/** The deno arguments every entry point runs with. */
export const DENO_RUN = ["run", "-A", "--v8-flags=--expose-gc"] as const;

/** The repository root, for entry points and the cwd of runs. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

const MARKER_VAR = "DTRAIN_TEST_MARKER";

/** The environment entry that marks processes (for runs started another way, e.g. `runRanks`). */
export function markerEnv(marker: string): Record<string, string> {
  return { [MARKER_VAR]: marker };
}

/**
 * Variables a launcher or a test sets; a run must not inherit them from a launched test runner
 * (library paths such as DTRAIN_LIB do pass).
 */
const JOB_VARS = new RegExp(
  "^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|" +
    "DTRAIN_(TOKEN|STORE_HOSTED|RESTART_COUNT|LAUNCHER_PID|NUM_THREADS|WEIGHTS_DUMP|TEST_.*)|" +
    // `deno task` sets the user's folder; a run started by a test is not inside one.
    "INIT_CWD)$",
);

/** A live process that carries a run's marker. */
export interface MarkedProcess {
  pid: number;
  /** "rank N" for a worker, "main process" for the one the run started, else "pid N". */
  role: string;
}

function readEnviron(pid: number): Map<string, string> | null {
  let raw: string;
  try {
    raw = new TextDecoder().decode(Deno.readFileSync(`/proc/${pid}/environ`));
  } catch {
    return null; // gone, or a zombie
  }
  const env = new Map<string, string>();
  for (const entry of raw.split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) env.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return env;
}

/** The live processes whose environment carries `marker`, workers named by their RANK. */
export function markedProcesses(marker: string, rootPid?: number): MarkedProcess[] {
  const found: MarkedProcess[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    const pid = Number(entry.name);
    if (!Number.isInteger(pid) || pid === Deno.pid) continue;
    const env = readEnviron(pid);
    if (env?.get(MARKER_VAR) !== marker) continue;
    const rank = env.get("RANK");
    const role = pid === rootPid
      ? "main process"
      : rank !== undefined
      ? `rank ${rank}`
      : `pid ${pid}`;
    found.push({ pid, role });
  }
  return found.sort((a, b) => a.pid - b.pid);
}

/** "main process (pid 12), rank 1 (pid 14)" */
export function describe(procs: MarkedProcess[]): string {
  return procs.map((p) => `${p.role} (pid ${p.pid})`).join(", ");
}

function killAll(procs: MarkedProcess[]): void {
  for (const p of procs) {
    try {
      Deno.kill(p.pid, "SIGKILL");
    } catch {
      // exited meanwhile
    }
  }
}

/** A run in progress, as seen by `onLine`. */
export interface Running {
  /** The process this run started. */
  child: Deno.ChildProcess;
  marker: string;
  /** Sends `signal` to the started process. */
  kill(signal: Deno.Signal): void;
}

/** How to run one entry point. */
export interface RunOptions {
  /** Arguments after `deno run -A --v8-flags=--expose-gc`, or after `deno` with `task`. */
  args: string[];
  /** Run `deno task ARGS` (with the repository's deno.json) instead of `deno run`. */
  task?: boolean;
  /** Run `bash -c ARGS[0]` (a command line as a page prints it) instead of `deno run`. */
  shell?: boolean;
  /** Hard limit; then every marked process is killed and the run fails naming them. */
  timeoutMs: number;
  /** Extra environment (the job variables of the caller's environment are dropped). */
  env?: Record<string, string>;
  /** Working folder (default the repository root). */
  cwd?: string;
  /** Called for every stdout and stderr line as it arrives. */
  onLine?: (line: string, run: Running) => void;
  /**
   * How long marked processes may outlive the started one before they count as left behind
   * (default 0: the launcher promises none outlives it).
   */
  leftoverGraceMs?: number;
}

/** How a run ended. */
export interface RunResult {
  code: number;
  signal: Deno.Signal | null;
  stdout: string;
  stderr: string;
  /** Marked processes still alive after the grace period (they have been killed since). */
  leftovers: MarkedProcess[];
  /**
   * What the run left in its TMPDIR, a fresh folder removed afterwards (the launcher's default
   * log folder goes there).
   */
  tempEntries: string[];
}

/** The environment of a run: the caller's, without job variables, plus the marker and TMPDIR. */
function runEnv(marker: string, tmp: string, options: RunOptions): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (!JOB_VARS.test(k)) env[k] = v;
  }
  return { ...env, NO_COLOR: "1", TMPDIR: tmp, ...options.env, ...markerEnv(marker) };
}

/**
 * Runs `deno run -A --v8-flags=--expose-gc ARGS` (or `deno task ARGS`, or a shell line) and waits
 * for it and its output.
 * @throws Error naming every marked process still running at the timeout (all killed first).
 */
export async function runDeno(options: RunOptions): Promise<RunResult> {
  const marker = crypto.randomUUID();
  const tmp = await Deno.makeTempDir({ prefix: "dtrain_run_" });
  const [program, args] = options.shell
    ? ["bash", ["-c", options.args[0]]]
    : [Deno.execPath(), options.task ? ["task", ...options.args] : [...DENO_RUN, ...options.args]];
  const child = new Deno.Command(program, {
    args,
    cwd: options.cwd ?? ROOT,
    clearEnv: true,
    env: runEnv(marker, tmp, options),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const running: Running = {
    child,
    marker,
    kill: (signal) => {
      try {
        child.kill(signal);
      } catch {
        // already exited
      }
    },
  };
  const onLine = (line: string) => options.onLine?.(line, running);
  const output = Promise.all([
    collectLines(child.stdout, onLine),
    collectLines(child.stderr, onLine),
  ]);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const hung = markedProcesses(marker, child.pid);
      killAll(hung);
      reject(
        new Error(
          `${options.args.join(" ")}: still running after ${options.timeoutMs} ms: ` +
            `${describe(hung) || "(no process found)"} (hung; killed)`,
        ),
      );
    }, options.timeoutMs);
  });
  try {
    const status = await Promise.race([child.status, timeout]);
    const [stdout, stderr] = await Promise.race([output, timeout]);
    const leftovers = await settle(marker, options.leftoverGraceMs ?? 0);
    const tempEntries = (await Array.fromAsync(Deno.readDir(tmp))).map((e) => e.name);
    return { code: status.code, signal: status.signal, stdout, stderr, leftovers, tempEntries };
  } finally {
    clearTimeout(timer);
    killAll(markedProcesses(marker));
    await Promise.allSettled([child.status, output]);
    await Deno.remove(tmp, { recursive: true });
  }
}

/** Waits up to `graceMs` for the marked processes to end; returns those still alive. */
async function settle(marker: string, graceMs: number): Promise<MarkedProcess[]> {
  const deadline = performance.now() + graceMs;
  for (;;) {
    const alive = markedProcesses(marker);
    if (alive.length === 0 || performance.now() >= deadline) return alive;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs `fn` with a new temporary folder and removes the folder afterwards. */
export async function withTempDir<R>(prefix: string, fn: (dir: string) => Promise<R>): Promise<R> {
  const dir = await Deno.makeTempDir({ prefix });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** One node of a multi-node test job on loopback: its launcher, with 2 workers. */
export interface NodeRun {
  nodeRank: number;
  /** `--nnodes`: a count, or MIN:MAX for an elastic job. */
  nnodes: string;
  /** The master's port (node 0's store). */
  port: number;
  /** The workers' script and its arguments. */
  script: string;
  job: string[];
  /** Extra environment (a DTRAIN_TOKEN here replaces the shared one). */
  env: Record<string, string>;
  onLine?: (line: string, run: Running) => void;
  /** `--max-restarts`. */
  restarts: number;
  timeoutMs: number;
}

/** The job token multi-node test jobs share: 32 bytes or more, as the launcher asks of them. */
export const NODE_TOKEN = "dtrain-test-job-token-0123456789abcdef";

/** Runs one node's launcher as `node` says. */
export function runNode(node: NodeRun): Promise<RunResult> {
  return runDeno({
    timeoutMs: node.timeoutMs,
    // Workers get SIGKILL from the kernel when their launcher dies; under load their exit can
    // take a moment to show. The guarantee (issue 9) is "within 2 s".
    leftoverGraceMs: 2_000,
    env: { DTRAIN_TOKEN: NODE_TOKEN, ...node.env },
    args: [
      `${ROOT}src/launch/main.ts`,
      ...["--nnodes", node.nnodes, "--node-rank", String(node.nodeRank), "--nproc-per-node", "2"],
      ...["--master-port", String(node.port), "--max-restarts", String(node.restarts)],
      node.script,
      ...node.job,
    ],
    onLine: node.onLine,
  });
}
