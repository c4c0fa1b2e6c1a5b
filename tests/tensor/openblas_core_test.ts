/**
 * dtrain picks OpenBLAS's kernels from the CPU's flags (ffi/openblas_core.ts) unless the user chose
 * them: checked in fresh processes, since OpenBLAS reads OPENBLAS_CORETYPE once, when it loads.
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { coreTypeFor } from "../../ffi/openblas_core.ts";

const worker = fileURLToPath(new URL("./workers/blas_core.ts", import.meta.url));

/** Runs the worker with the test's environment, OPENBLAS_CORETYPE replaced by `coretype`. */
async function coreInChild(coretype?: string): Promise<{ core: string; env: string | null }> {
  const env = Deno.env.toObject();
  delete env.OPENBLAS_CORETYPE; // this test process set it when it loaded dtrain
  if (coretype !== undefined) env.OPENBLAS_CORETYPE = coretype;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", worker],
    clearEnv: true,
    env,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(30_000),
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, `blas_core.ts exited with ${out.signal ?? out.code}:\n${stderr}`);
  return JSON.parse(new TextDecoder().decode(out.stdout).trim());
}

const flags = (() => {
  try {
    const text = Deno.readTextFileSync("/proc/cpuinfo");
    return new Set(/^flags\s*:(.*)$/m.exec(text)?.[1].trim().split(/\s+/) ?? []);
  } catch {
    return new Set<string>();
  }
})();
const expected = coreTypeFor(flags);

Deno.test({
  name: "OpenBLAS runs the kernels the CPU flags allow when OPENBLAS_CORETYPE is unset",
  ignore: expected === undefined, // neither AVX2+FMA nor AVX-512: OpenBLAS's own choice stands
  fn: async () => {
    assert.deepEqual(await coreInChild(), { core: expected, env: expected });
  },
});

Deno.test("a user's OPENBLAS_CORETYPE is never overridden", async () => {
  assert.deepEqual(await coreInChild("Prescott"), { core: "Prescott", env: "Prescott" });
});

Deno.test("coreTypeFor needs all four AVX-512 flags for SkylakeX, else AVX2 and FMA for Haswell", () => {
  const avx512 = ["avx512f", "avx512bw", "avx512vl", "avx512dq"];
  assert.equal(coreTypeFor(new Set([...avx512, "avx2", "fma"])), "SkylakeX");
  assert.equal(coreTypeFor(new Set([...avx512.slice(1), "avx2", "fma"])), "Haswell");
  assert.equal(coreTypeFor(new Set(["avx2"])), undefined);
  assert.equal(coreTypeFor(new Set()), undefined);
});
