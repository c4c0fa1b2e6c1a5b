// scripts/gpu_check.sh, checked where it is written: it parses, shellcheck finds nothing, and its
// steps' time limits (each with the grace `timeout --kill-after` gives) fit the 8 minutes the
// check promises. (It runs on a GPU machine; nothing here can run it.)
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { hasCommand } from "../infrastructure/shell.ts";

const SCRIPT = fileURLToPath(new URL("../../scripts/gpu_check.sh", import.meta.url));
const text = Deno.readTextFileSync(SCRIPT);

Deno.test("scripts/gpu_check.sh parses with bash -n", async () => {
  const output = await new Deno.Command("bash", { args: ["-n", SCRIPT], stderr: "piped" }).output();
  assert.ok(output.success, new TextDecoder().decode(output.stderr));
});

Deno.test({
  name: `shellcheck finds nothing in scripts/gpu_check.sh${
    hasCommand("shellcheck") ? "" : " [skipped: shellcheck not found]"
  }`,
  ignore: !hasCommand("shellcheck"),
}, async () => {
  const output = await new Deno.Command("shellcheck", { args: [SCRIPT], stdout: "piped" }).output();
  assert.ok(output.success, new TextDecoder().decode(output.stdout));
});

Deno.test("gpu_check.sh's step limits, each with its kill grace, add up to at most 480 s", () => {
  const grace = Number(/timeout --kill-after=(\d+) /.exec(text)?.[1]);
  assert.ok(grace > 0, "every step runs under timeout --kill-after");
  const limits = [...text.matchAll(/^step "([^"]+)" (\d+) /gm)].map((m) => Number(m[2]));
  // The machine, the build, CUDA's availability, the CUDA tests and both benchmarks.
  assert.equal(limits.length, 6, `steps: ${limits}`);
  const total = limits.reduce((sum, limit) => sum + limit + grace, 0);
  assert.ok(total <= 480, `${total} s`);
  // The CUDA tests step runs the whole folder, the pinned DataLoader's test with it.
  assert.match(text, /^step "CUDA tests \(tests\/cuda\)" \d+ deno test .* tests\/cuda\/$/m);
});
