/**
 * The shell commands a documentation page prints: what tests/docs/commands_test.ts parses and
 * tests/docs/fresh_clone_test.ts runs.
 * @module
 */

import { join } from "node:path";
import { ROOT } from "../_harness/processes.ts";

/** The pages whose commands a new user runs first. */
export const PAGES = ["README.md", "docs/nanogpt.md"];

/** The words of a shell line: quotes grouped, `# comments` dropped. */
export function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"([^"]*)"|'([^']*)'|(#.*$)|(\S+)/g)) {
    if (m[3] !== undefined) break;
    out.push(m[1] ?? m[2] ?? m[4]);
  }
  return out;
}

/** Every command of the page's `sh` blocks (under `root`), continuation lines joined. */
export function commandsOf(page: string, root: string = ROOT): string[][] {
  const text = Deno.readTextFileSync(join(root, page));
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```/gm)].flatMap(([, block]) =>
    block.replace(/\\\n/g, " ").split("\n").map(words).filter((w) => w.length > 0)
  );
}
