// scripts/cuda_host_coverage.sh, checked where it is written: shellcheck finds nothing in it. Its
// real run (a gcov build of the whole host library, about 35 s here) is left to whoever measures
// coverage, as the benchmarks are: the suite's time goes to the GPU tests themselves.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { hasCommand } from "../infrastructure/shell.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SCRIPT = join(ROOT, "scripts/cuda_host_coverage.sh");
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** " [skipped: ... not found]" for the commands of `tools` missing here, else "". */
function skipped(tools: string[]): string {
  const missing = tools.filter((tool) => !hasCommand(tool));
  return missing.length > 0 ? ` [skipped: ${missing.join(" and ")} not found]` : "";
}

const noShellcheck = skipped(["shellcheck"]);
Deno.test({
  name: `shellcheck finds nothing in scripts/cuda_host_coverage.sh${noShellcheck}`,
  ignore: noShellcheck !== "",
}, async () => {
  const output = await new Deno.Command("shellcheck", { args: [SCRIPT], stdout: "piped" }).output();
  assert.ok(output.success, decode(output.stdout));
});
