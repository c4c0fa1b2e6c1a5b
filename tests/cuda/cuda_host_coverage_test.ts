// scripts/cuda_host_coverage.sh, checked where it is written: shellcheck finds nothing in it, and
// on one small GPU test file it builds its gcov variant of the host library, runs the file there
// and says, for every exported function, whether it ran, ending with the count.
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

const noBuild = skipped(["make", "c++", "gcov", "nm"]);
Deno.test({
  name: `cuda_host_coverage.sh says which exports a test file ran, then how many${noBuild}`,
  ignore: noBuild !== "",
}, async () => {
  const output = await new Deno.Command("bash", {
    args: [SCRIPT, "tests/cuda/nccl_shim_test.ts"],
    cwd: ROOT,
    env: { DENO: Deno.execPath() },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(output.code, 0, decode(output.stderr).slice(-4000));
  const lines = decode(output.stdout).trimEnd().split("\n");
  const summary = /^(\d+) of (\d+) exported functions ran$/.exec(lines.pop()!);
  assert.ok(summary, `the last line is the count, got ${JSON.stringify(summary)}`);
  const status = new Map(lines.map((line) => {
    const m = /^(dt_\w+) +(ran|never ran)$/.exec(line);
    assert.ok(m, `not a function and its status: ${JSON.stringify(line)}`);
    return [m[1], m[2]];
  }));
  assert.equal(status.size, Number(summary[2]));
  assert.equal([...status.values()].filter((s) => s === "ran").length, Number(summary[1]));
  // The test calls the NCCL shim's all-reduce (with codes it refuses), and no kernel.
  assert.equal(status.get("dt_nccl_allreduce"), "ran");
  assert.equal(status.get("dt_abs"), "never ran");
});
