/**
 * Runs a worker script as N real rank processes (`deno run -A`), with the env:// variables
 * set, and collects what each printed. A hard timeout kills every rank and fails naming the
 * ranks that hung; no process outlives `runRanks`.
 * @module
 */

import { collectLines } from "./lines.ts";

/** What one rank did. */
export interface RankResult {
  rank: number;
  pid: number;
  /** Exit code (137 or similar when killed). */
  code: number;
  signal: Deno.Signal | null;
  stdout: string;
  stderr: string;
  /** The last stdout line that parsed as a JSON object, if any. */
  result: Record<string, unknown> | undefined;
  /** Milliseconds from spawn to exit. */
  elapsedMs: number;
}

/** A running rank, as seen by `onLine`. */
export interface RankProcess {
  rank: number;
  child: Deno.ChildProcess;
  exited: boolean;
}

/** How to run the ranks. */
export interface RunRanksOptions {
  /** The worker script. */
  worker: URL;
  /** WORLD_SIZE. */
  worldSize: number;
  /** Which ranks to start (default all); the others are simply missing. */
  ranks?: number[];
  /** Hard limit for the whole run, after which every rank is killed and the run fails. */
  timeoutMs: number;
  /** Extra env for every rank, or per rank. */
  env?: Record<string, string> | ((rank: number) => Record<string, string>);
  /** MASTER_PORT; default a free port. */
  port?: number;
  /** DTRAIN_TOKEN; default a fresh random token. */
  token?: string;
  /** Called for each stdout line as it arrives, e.g. to kill a rank at a chosen point. */
  onLine?: (rank: number, line: string, procs: RankProcess[]) => void;
  /** Flags of `deno run` before the worker (after `-A`), e.g. `--no-code-cache`. */
  denoFlags?: string[];
}

/** A port nobody listens on right now. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = l.addr.port;
  l.close();
  return port;
}

function lastJson(stdout: string): Record<string, unknown> | undefined {
  const lines = stdout.trim().split("\n").reverse();
  for (const line of lines) {
    if (!line.startsWith("{")) continue;
    try {
      return JSON.parse(line);
    } catch {
      // not a result line
    }
  }
  return undefined;
}

function tail(text: string, lines = 8): string {
  return text.trim().split("\n").slice(-lines).join("\n    ");
}

/**
 * Spawns the ranks, waits for all of them, and returns their results in rank order.
 * @throws Error naming the ranks still running at the timeout (all ranks are killed first).
 */
export async function runRanks(options: RunRanksOptions): Promise<RankResult[]> {
  const port = options.port ?? freePort();
  const token = options.token ?? crypto.randomUUID();
  const ranks = options.ranks ?? Array.from({ length: options.worldSize }, (_, i) => i);
  const procs: RankProcess[] = [];
  const started = performance.now();
  const timer = { id: 0 as ReturnType<typeof setTimeout> | 0, fired: false };
  try {
    const running = ranks.map((rank) => {
      const extra = typeof options.env === "function" ? options.env(rank) : options.env ?? {};
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", ...options.denoFlags ?? [], options.worker.href],
        env: {
          RANK: String(rank),
          LOCAL_RANK: String(rank),
          WORLD_SIZE: String(options.worldSize),
          MASTER_ADDR: "127.0.0.1",
          MASTER_PORT: String(port),
          DTRAIN_TOKEN: token,
          NO_COLOR: "1",
          ...extra,
        },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const proc: RankProcess = { rank, child, exited: false };
      procs.push(proc);
      const stdout = collectLines(child.stdout, (line) => options.onLine?.(rank, line, procs));
      const stderr = collectLines(child.stderr, () => {});
      return (async (): Promise<RankResult> => {
        const status = await child.status;
        proc.exited = true;
        const elapsedMs = performance.now() - started;
        const out = await stdout;
        return {
          rank,
          pid: child.pid,
          code: status.code,
          signal: status.signal,
          stdout: out,
          stderr: await stderr,
          result: lastJson(out),
          elapsedMs,
        };
      })();
    });
    const timeout = new Promise<never>((_, reject) => {
      timer.id = setTimeout(() => {
        timer.fired = true;
        const hung = procs.filter((p) => !p.exited).map((p) => p.rank);
        for (const p of procs) if (!p.exited) p.child.kill("SIGKILL");
        reject(
          new Error(
            `rank${hung.length === 1 ? "" : "s"} ${hung.join(", ")} of ${options.worldSize} ` +
              `still running after ${options.timeoutMs} ms (hung; killed)`,
          ),
        );
      }, options.timeoutMs);
    });
    const results = await Promise.race([Promise.all(running), timeout]);
    return results;
  } finally {
    clearTimeout(timer.id);
    for (const p of procs) {
      if (!p.exited) {
        try {
          p.child.kill("SIGKILL");
        } catch {
          // exited between the check and the kill
        }
      }
    }
    // Reap every child (and drain its pipes) so nothing outlives the run.
    await Promise.allSettled(procs.map((p) => p.child.status));
  }
}

/** Throws unless every rank exited 0; the message shows each failing rank's stderr. */
export function assertAllOk(results: RankResult[]): void {
  const bad = results.filter((r) => r.code !== 0);
  if (bad.length === 0) return;
  throw new Error(
    bad.map((r) =>
      `rank ${r.rank} exited ${r.code}${r.signal ? ` (${r.signal})` : ""}:\n    ` +
      tail(r.stderr || r.stdout)
    ).join("\n"),
  );
}
