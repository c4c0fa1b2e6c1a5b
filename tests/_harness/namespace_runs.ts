/**
 * Commands run inside network namespaces, all at once, with one hard timeout: what the
 * multi-host harnesses (tests/infrastructure/netns_cluster.ts's nodes, throttled_link.ts's two
 * hosts) share. A command still running at the timeout has everything in the namespaces killed,
 * and the error names each command as hung or exited, with its last lines.
 * @module
 */

/** How one command ended. */
export interface NamespaceRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** One command: its `ip netns exec ...` arguments (after `ip`) and its whole environment. */
export interface NamespaceCommand {
  ipArgs: string[];
  env: Record<string, string>;
}

/** The last lines of a process's output, indented, for a failure message. */
export function tail(text: string, lines = 20): string {
  if (text.trim() === "") return "  (no output)";
  return text.trimEnd().split("\n").slice(-lines).map((line) => `  ${line}`).join("\n");
}

/**
 * Runs `commands` at once and waits for all of them.
 *
 * @param commands What to run.
 * @param timeoutMs The hard limit for all of them together.
 * @param killAll Kills every process in the namespaces (the hung commands' included).
 * @param name Command i as the error names it, e.g. "node 1" or "command 0 on host 1".
 * @returns Each command's end, in order.
 * @throws Error naming the commands still running after `timeoutMs`, once `killAll` returned.
 */
export async function runInNamespaces(
  commands: readonly NamespaceCommand[],
  timeoutMs: number,
  killAll: () => Promise<void>,
  name: (i: number) => string,
): Promise<NamespaceRun[]> {
  const exited = commands.map(() => false);
  const runs = commands.map(async ({ ipArgs, env }, i): Promise<NamespaceRun> => {
    const child = new Deno.Command("ip", {
      args: ipArgs,
      env,
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const [stdout, stderr, status] = await Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
      child.status,
    ]);
    exited[i] = true;
    return { code: status.code, stdout, stderr };
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  try {
    const finished = await Promise.race([Promise.all(runs), timeout]);
    if (finished !== "timeout") return finished;
    const hung = exited.flatMap((done, i) => (done ? [] : [i]));
    await killAll();
    const partial = await Promise.all(runs);
    throw new Error(
      `${hung.map(name).join(" and ")} still running after ${timeoutMs} ms (hung; every ` +
        `process in the namespaces killed)\n` +
        partial.map((r, i) =>
          `${name(i)} (${hung.includes(i) ? "hung" : `exited with ${r.code}`}), last lines:\n${
            tail(r.stdout + r.stderr)
          }`
        ).join("\n"),
    );
  } finally {
    clearTimeout(timer);
    await Promise.allSettled(runs);
  }
}
