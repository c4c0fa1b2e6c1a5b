/**
 * One node's workers: starts them with the distributed environment, prefixes and logs their
 * output, and stops them (SIGTERM, then SIGKILL after a grace period). Used by the launcher for
 * static and elastic jobs alike.
 * @module
 */

import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { openAppend, ownFolder } from "../io/private_files.ts";
import { type SyncWriter, writeAll } from "../io/write_all.ts";
import type { LaunchOptions } from "./options.ts";
import { EXIT_STOPPED, STOP_FILE_ENV } from "./stop_request.ts";
import { askForLedgers, ledgerDirOf, removeLedgerFile } from "./ledger.ts";

/** How long the other workers of a failed one get to exit on their own before SIGTERM. */
const PEER_SETTLE_MS = 1000;
/** How long those still running then get to write their ledgers. */
const LEDGER_WAIT_MS = 1000;

/**
 * What `deno run` is given for the module at `url`: a path for a local file, else the URL itself
 * (dtrain imported from JSR or any URL starts its workers from there too).
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { runnable } from "./supervisor.ts";
 * assertEquals(runnable("file:///opt/dtrain/src/train/main.ts"), "/opt/dtrain/src/train/main.ts");
 * assertEquals(runnable("https://jsr.io/@dtrain/dtrain/0.1.0/src/train/main.ts"),
 *   "https://jsr.io/@dtrain/dtrain/0.1.0/src/train/main.ts");
 * ```
 */
export function runnable(url: string | URL): string {
  const parsed = new URL(url);
  return parsed.protocol === "file:" ? fileURLToPath(parsed) : parsed.href;
}

/** Preloaded into every worker: it dies with the launcher whatever its script does. */
const WORKER_BOOTSTRAP = runnable(new URL("../distributed/worker_bootstrap.ts", import.meta.url));

/**
 * The signals the launcher passes on to every worker (a terminal's hangup and quit as well as
 * Ctrl-C and a scheduler's SIGTERM), and the numbers that make its exit code 128 + n, as a shell
 * reports a process killed by one.
 */
const SIGNAL_NUMBERS = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGTERM: 15 } as const;

/** A signal the launcher forwards to its workers. */
export type ForwardedSignal = keyof typeof SIGNAL_NUMBERS;

/** The signals the launcher forwards to its workers. */
export const FORWARDED_SIGNALS = Object.keys(SIGNAL_NUMBERS) as ForwardedSignal[];

/**
 * The launcher's exit code after `signal` interrupted it: 128 + the signal's number.
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { signalExitCode } from "./supervisor.ts";
 * assertEquals(signalExitCode("SIGHUP"), 129);
 * assertEquals(signalExitCode("SIGTERM"), 143);
 * ```
 */
export function signalExitCode(signal: ForwardedSignal): number {
  return 128 + SIGNAL_NUMBERS[signal];
}

/** How one worker ended. */
export interface WorkerExit {
  rank: number;
  localRank: number;
  code: number;
  signal: Deno.Signal | null;
}

/** A started worker. */
interface StartedWorker {
  rank: number;
  localRank: number;
  child: Deno.ChildProcess;
}

/** "exited with code 3" or "was killed by SIGKILL". */
export function describeExit(exit: WorkerExit): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** Where this node's workers sit in the job for one run of the group. */
export interface Placement {
  /** This node's index among the nodes of the run. */
  nodeRank: number;
  /** Nodes in the run. */
  nnodes: number;
  /**
   * The file whose creation asks the workers to stop at their next step boundary (an elastic
   * round that can grow; stop_request.ts): a worker that then exits with EXIT_STOPPED did not fail.
   */
  stopFile?: string;
}

/**
 * Creates the log folder, or checks the one given: it must be this user's (or root's, as /tmp),
 * writable by no one else unless its sticky bit protects our files, under folders no other user
 * can rename; so must DTRAIN_LEDGER_DIR when it is elsewhere ([Note: no writes through planted
 * links] in io/private_files.ts).
 *
 * @param logDir The job's log folder.
 * @throws UnsafePathError naming the folder, its owner and mode.
 */
export function ownLogFolder(logDir: string): void {
  const fix = "remove it, or give --log-dir a folder of your own";
  ownFolder(logDir, { what: "log folder", fix, shared: true });
  const ledgers = ledgerDirOf(logDir);
  if (ledgers !== resolve(logDir)) {
    ownFolder(ledgers, { what: "ledger folder (DTRAIN_LEDGER_DIR)", fix, shared: true });
  }
}

/** Starts, watches and stops one node's workers. */
export class Supervisor {
  interruptedBy: ForwardedSignal | null = null;
  /** Whether a worker of the last group stopped as its stop file asked (EXIT_STOPPED). */
  stoppedOnRequest = false;
  #children: Deno.ChildProcess[] = [];
  /** This group's workers that have not exited yet. */
  #running: StartedWorker[] = [];
  #placement: Placement;

  constructor(readonly options: LaunchOptions, readonly token: string, readonly logDir: string) {
    this.#placement = { nodeRank: options.nodeRank, nnodes: options.nnodes };
  }

  logPath(localRank: number): string {
    return join(
      this.logDir,
      `rank_${this.#placement.nodeRank * this.options.nprocPerNode + localRank}.log`,
    );
  }

  /**
   * Forwards a signal to the workers, SIGKILLing those still alive after the grace period; the
   * group then ends and the launcher exits.
   */
  interrupt(signal: ForwardedSignal): void {
    this.interruptedBy = signal;
    void this.#stop(this.#children, signal);
  }

  /** Runs one generation of workers; resolves to the first failure, or null if all succeeded. */
  async runGroup(attempt: number, placement?: Placement): Promise<WorkerExit | null> {
    this.#placement = placement ?? this.#placement;
    // Opened before any worker starts: a log refused as unsafe leaves no worker to stop.
    const logs = this.#openLogs();
    let workers: StartedWorker[];
    try {
      workers = await this.#spawnAll(attempt);
    } catch (error) {
      for (const log of logs) log.close();
      throw error;
    }
    this.#children = workers.map((w) => w.child);
    this.#running = [...workers];
    this.stoppedOnRequest = false;
    if (this.interruptedBy) this.interrupt(this.interruptedBy);

    for (const w of workers) {
      const header = `--- attempt ${attempt}, rank ${w.rank}, pid ${w.child.pid}\n`;
      writeAll(logs[w.localRank], new TextEncoder().encode(header));
    }
    const live = Deno.stdout.isTerminal();
    const pumps = workers.flatMap((w) => [
      pump(w.child.stdout, `[rank ${w.rank}] `, Deno.stdout, logs[w.localRank], live),
      pump(w.child.stderr, `[rank ${w.rank}] `, Deno.stderr, logs[w.localRank], false),
    ]);

    let firstFailure: WorkerExit | null = null;
    await Promise.all(workers.map(async (w) => {
      const status = await w.child.status;
      this.#running = this.#running.filter((o) => o !== w);
      const stopped = this.#placement.stopFile !== undefined && status.code === EXIT_STOPPED;
      if (stopped) this.stoppedOnRequest = true;
      if ((status.code !== 0 || status.signal) && !stopped && firstFailure === null) {
        firstFailure = {
          rank: w.rank,
          localRank: w.localRank,
          code: status.code,
          signal: status.signal,
        };
        // Peers usually fail on the same cause a moment later (a collective error reaches every
        // rank): give them up to a second to exit and print their own message before stopping them.
        const others = workers.filter((o) => o !== w).map((o) => o.child.status);
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          Promise.all(others),
          new Promise((resolve) => (timer = setTimeout(resolve, PEER_SETTLE_MS))),
        ]);
        clearTimeout(timer);
        // Those still running write their ledgers before they are stopped (launch/ledger.ts).
        const alive = this.#running.map((o) => o.rank);
        await askForLedgers(alive, ledgerDirOf(this.logDir), LEDGER_WAIT_MS);
        await this.stopAll(w.child);
      }
    }));
    await Promise.all(pumps);
    for (const log of logs) log.close();
    this.#children = [];
    return firstFailure;
  }

  /**
   * Opens this node's per-rank logs to append to, never through a link another user planted
   * ([Note: no writes through planted links] in io/private_files.ts).
   */
  #openLogs(): Deno.FsFile[] {
    const logs: Deno.FsFile[] = [];
    try {
      for (let localRank = 0; localRank < this.options.nprocPerNode; localRank++) {
        logs.push(openAppend(this.logPath(localRank), "log file"));
      }
    } catch (error) {
      for (const log of logs) log.close();
      throw error;
    }
    return logs;
  }

  /**
   * Starts this node's workers. When a spawn fails, the workers already started are stopped and
   * waited for before the error is thrown, so none outlives the launcher.
   */
  async #spawnAll(attempt: number): Promise<StartedWorker[]> {
    const { nprocPerNode } = this.options;
    const { nnodes, nodeRank } = this.#placement;
    const threads = Math.max(1, Math.floor(navigator.hardwareConcurrency / nprocPerNode));
    const workers: StartedWorker[] = [];
    for (let localRank = 0; localRank < nprocPerNode; localRank++) {
      const rank = nodeRank * nprocPerNode + localRank;
      const env: Record<string, string> = {
        RANK: String(rank),
        LOCAL_RANK: String(localRank),
        WORLD_SIZE: String(nnodes * nprocPerNode),
        LOCAL_WORLD_SIZE: String(nprocPerNode),
        GROUP_RANK: String(nodeRank),
        MASTER_ADDR: this.options.masterAddr,
        MASTER_PORT: String(this.options.masterPort),
        DTRAIN_TOKEN: this.token,
        DTRAIN_STORE_HOSTED: "1",
        DTRAIN_RESTART_COUNT: String(attempt),
        DTRAIN_LAUNCHER_PID: String(Deno.pid),
        DTRAIN_NUM_THREADS: String(threads),
        OPENBLAS_NUM_THREADS: String(threads),
        OMP_NUM_THREADS: String(threads),
      };
      if (this.#placement.stopFile) env[STOP_FILE_ENV] = this.#placement.stopFile;
      // Each rank's flight recorder (src/distributed/ledger.ts) lands beside its log.
      env.DTRAIN_LEDGER_DIR = ledgerDirOf(this.logDir);
      removeLedgerFile(env.DTRAIN_LEDGER_DIR, rank);
      // Workers write to pipes; this lets rank 0 redraw its progress line on our terminal.
      if (Deno.stdout.isTerminal()) env.DTRAIN_TTY = "1";
      try {
        const child = new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "-A",
            "--v8-flags=--expose-gc",
            `--preload=${WORKER_BOOTSTRAP}`,
            this.options.script,
            ...this.options.scriptArgs,
          ],
          env,
          stdin: "null",
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        workers.push({ rank, localRank, child });
      } catch (cause) {
        const started = workers.map((w) => w.child);
        await this.#stop(started, "SIGTERM");
        await Promise.all(started.map(async (c) => {
          await Promise.all([c.stdout.cancel(), c.stderr.cancel()]);
          await c.status;
        }));
        throw new Error(
          `launch: cannot start rank ${rank} (local rank ${localRank}): ` +
            `${(cause as Error).message}; stopped the ${started.length} worker(s) already started`,
          { cause },
        );
      }
    }
    return workers;
  }

  /** The job ranks of the workers still running. */
  runningRanks(): number[] {
    return this.#running.map((w) => w.rank);
  }

  /** The job ranks of this node's workers. */
  localRanks(): number[] {
    const { nprocPerNode } = this.options;
    return Array.from(
      { length: nprocPerNode },
      (_, i) => this.#placement.nodeRank * nprocPerNode + i,
    );
  }

  /** Stops the running group (another node's failure ends it); the launcher goes on. */
  stopGroup(): Promise<void> {
    return this.#stop(this.#children, "SIGTERM");
  }

  /** SIGTERM every other worker, then SIGKILL whatever is left after the grace period. */
  stopAll(except: Deno.ChildProcess): Promise<void> {
    return this.#stop(this.#children.filter((c) => c !== except), "SIGTERM");
  }

  /** Sends `signal` to `children`, then SIGKILL to those still alive after the grace period. */
  async #stop(children: Deno.ChildProcess[], signal: Deno.Signal): Promise<void> {
    for (const c of children) trySignal(c, signal);
    const grace = this.options.killGraceMs ?? 5000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exited = Promise.all(children.map((c) => c.status));
    const timedOut = await Promise.race([
      exited.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), grace))),
    ]);
    clearTimeout(timer);
    if (timedOut) { for (const c of children) trySignal(c, "SIGKILL"); }
  }
}

function trySignal(child: Deno.ChildProcess, signal: Deno.Signal): void {
  try {
    child.kill(signal);
  } catch {
    // Already exited.
  }
}

/**
 * Copies a worker's stream line by line to the console with a rank prefix, and to its log. With
 * `live` (the console is a terminal) a line still being redrawn (`\r` without a newline yet, a
 * progress line) is shown as it changes; the log gets each line's final text only.
 */
async function pump(
  stream: ReadableStream<Uint8Array>,
  prefix: string,
  console: SyncWriter,
  log: Deno.FsFile,
  live: boolean,
): Promise<void> {
  const encoder = new TextEncoder();
  // What a redrawn line shows: the text after its last carriage return, without "erase in line".
  const ERASE = "\x1b[K";
  const shown = (line: string) => {
    const text = line.slice(line.lastIndexOf("\r") + 1);
    return text.startsWith(ERASE) ? text.slice(ERASE.length) : text;
  };
  let pending = "", redrawn = false;
  const emit = (line: string) => {
    const text = shown(line);
    writeAll(console, encoder.encode(`${redrawn ? `\r${ERASE}` : ""}${prefix}${text}\n`));
    writeAll(log, encoder.encode(text + "\n"));
    redrawn = false;
  };
  const decoder = new TextDecoder();
  for await (const bytes of stream) {
    pending += decoder.decode(bytes, { stream: true });
    let newline;
    while ((newline = pending.indexOf("\n")) >= 0) {
      emit(pending.slice(0, newline));
      pending = pending.slice(newline + 1);
    }
    if (live && pending.includes("\r")) {
      writeAll(console, encoder.encode(`\r${ERASE}${prefix}${shown(pending)}`));
      redrawn = true;
    }
  }
  if (pending) emit(pending);
}

/** The last `lines` lines of a log file. */
export async function logTail(path: string, lines: number): Promise<string> {
  try {
    const text = await Deno.readTextFile(path);
    return text.trimEnd().split("\n").slice(-lines).map((l) => `  ${l}`).join("\n");
  } catch {
    return "  (no log)";
  }
}
