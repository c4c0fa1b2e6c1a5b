// oneDNN's matmul plumbing behind dt_matmul_bf16 (csrc/core/onednn.c), on any CPU with oneDNN 2.x:
// the file is built with f32 operands (-DDT_ONEDNN_F32_OPERANDS) into tests/tensor/_onednn_f32.c's
// checker, linked to build/libdtrain.so, and compared with a double-precision loop on exact values.
// Only the element type differs from the bf16 path, which needs avx512_bf16 (matmul_bf16_test.ts).

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const build = `${root}build`;

/** Why the check cannot run here, or "" when it can. */
function skipReason(): string {
  if (!existsSync(`${build}/libdtrain.so`)) return "build/libdtrain.so is not built";
  try {
    Deno.dlopen("libdnnl.so.2", {}).close();
  } catch {
    return "libdnnl.so.2 (oneDNN 2.x) is not installed";
  }
  try {
    new Deno.Command("cc", { args: ["--version"], stdout: "null", stderr: "null" }).outputSync();
  } catch {
    return "no C compiler (cc)";
  }
  return "";
}

const skip = skipReason();

Deno.test({
  name: "oneDNN's matmul as dt_matmul_bf16 drives it gives exact products (f32 operands)" +
    (skip ? ` [skipped: ${skip}]` : ""),
  ignore: skip !== "",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "dtrain_onednn_" });
    try {
      const exe = `${dir}/onednn_f32`;
      const cc = await new Deno.Command("cc", {
        args: [
          ...["-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-DDT_ONEDNN_F32_OPERANDS"],
          ...[
            `-I${root}csrc/core`,
            `${root}csrc/core/onednn.c`,
            `${root}csrc/core/onednn_cpu.c`,
            `${root}csrc/core/onednn_load.c`,
            `${root}tests/tensor/_onednn_f32.c`,
          ],
          ...[
            `-L${build}`,
            "-ldtrain",
            `-Wl,-rpath,${build}`,
            "-ldl",
            "-lpthread",
            "-lm",
            "-o",
            exe,
          ],
        ],
        stderr: "piped",
      }).output();
      assert.ok(cc.success, new TextDecoder().decode(cc.stderr));
      const run = await new Deno.Command(exe, { stdout: "piped", stderr: "piped" }).output();
      const out = new TextDecoder().decode(run.stdout) + new TextDecoder().decode(run.stderr);
      assert.ok(run.success, out);
      const lines = out.trim().split("\n");
      assert.equal(lines.filter((l) => l.startsWith("ok ")).length, 14 + 60, out);
      // Every primitive runs on one thread of dtrain's pool: OpenMP starts no team of its own.
      const [, before, after] = /^threads (\d+) (\d+)$/m.exec(out) ?? [];
      assert.equal(after, before, `threads before the products and after them:\n${out}`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
