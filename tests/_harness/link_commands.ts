/**
 * Commands for tests/_harness/throttled_link.ts: running a program to completion, waiting for a
 * readiness line, the environment a command on a host starts from.
 * @module
 */

import { tail } from "../infrastructure/netns_cluster.ts";

/** Whether `program` can be started here. */
export function which(program: string): boolean {
  try {
    return new Deno.Command(program, { args: ["-V"], stdout: "null", stderr: "null" })
      .outputSync().code !== 127;
  } catch {
    return false;
  }
}

/** The environment a command on a host starts from: a clean one that still finds deno's cache. */
export function hostEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    ...(Deno.env.has("DENO_DIR") ? { DENO_DIR: Deno.env.get("DENO_DIR")! } : {}),
    NO_COLOR: "1",
    DENO_NO_UPDATE_CHECK: "1",
    ...extra,
  };
}

/** Runs `program`; its stdout, or an Error with its stderr when it fails. */
export async function run(program: string, args: string[]): Promise<string> {
  const output = await new Deno.Command(program, { args, stdout: "piped", stderr: "piped" })
    .output();
  const decoder = new TextDecoder();
  if (!output.success) {
    throw new Error(`${program} ${args.join(" ")}: ${decoder.decode(output.stderr).trim()}`);
  }
  return decoder.decode(output.stdout);
}

/** Reads `stream` line by line until a line equal to `want`, then keeps draining it. */
export async function awaitLine(
  stream: ReadableStream<Uint8Array>,
  want: string,
  what: string,
): Promise<{ drained: Promise<string> }> {
  const reader = (stream as ReadableStream<BufferSource>).pipeThrough(new TextDecoderStream())
    .getReader();
  let seen = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${what} exited before printing "${want}":\n${tail(seen)}`);
    seen += value;
    if (seen.split("\n").slice(0, -1).includes(want)) break;
  }
  const drained = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return seen;
      seen += value;
    }
  })();
  return { drained };
}
