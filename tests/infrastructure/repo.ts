// This checkout, as the tests that run it on other "nodes" see it, and its native build.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

/** The checkout's root folder, without a trailing slash. */
export const REPO = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "");

/** `make build` once, here, so that several nodes' `deno task train` do not compile at once. */
export async function build(): Promise<void> {
  const output = await new Deno.Command("make", { args: ["-C", REPO, "build"], stderr: "piped" })
    .output();
  assert.ok(output.success, `make build: ${new TextDecoder().decode(output.stderr)}`);
}
