// The README's quick start on a fresh machine: `make train` compiles the CUDA library only where a
// GPU is or NVCC is given (a minute of nvcc a CPU machine spent for nothing before its first step),
// and the Deno that bootstrap.sh installs is reachable as `deno`, which every `deno task` command
// of the docs assumes: linked into /usr/local/bin as root, otherwise the PATH line printed.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const hasGpu = (() => {
  try {
    return new Deno.Command("nvidia-smi", { args: ["-L"], stdout: "piped", stderr: "null" })
      .outputSync().stdout.length > 0;
  } catch {
    return false;
  }
})();

/** The commands `make -n TARGET` would run from a clean build folder (nothing is built). */
function plan(target: string, env: Record<string, string> = {}, args: string[] = []): string {
  const build = Deno.makeTempDirSync({ prefix: "dtrain_plan_" });
  try {
    const out = new Deno.Command("make", {
      args: ["-n", target, `BUILD=${build}`, ...args],
      cwd: ROOT,
      env: { ...env, ARGS: "" },
      stdout: "piped",
      stderr: "piped",
    }).outputSync();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, text);
    return text;
  } finally {
    Deno.removeSync(build, { recursive: true });
  }
}

Deno.test({
  name: "make train compiles the CUDA library only where a GPU is or NVCC is given",
  // A GPU, or NVCC in the environment, asks for the CUDA library.
  ignore: hasGpu || Deno.env.get("NVCC") !== undefined,
  fn() {
    const train = plan("train");
    assert.match(train, /libdtrain\.so/);
    assert.doesNotMatch(train, /libdtrain_cuda\.so|nvcc/, train);
    assert.match(plan("train", {}, ["NVCC=nvcc"]), /libdtrain_cuda\.so/);
  },
});

/** Root (for the mount namespace), with the Deno bootstrap.sh pins already in .tools/ (no download). */
const canBootstrap = Deno.uid() === 0 && (() => {
  try {
    return Deno.statSync(`${ROOT}.tools/node_modules/.bin/deno`).isFile;
  } catch {
    return false;
  }
})();

/** Runs scripts/bootstrap.sh with `path` as PATH, inside a mount namespace with an empty /usr/local/bin. */
function bootstrap(path: string): { code: number; stderr: string; linked: string | null } {
  const script =
    `mount -t tmpfs none /usr/local/bin && PATH=${path} scripts/bootstrap.sh >/dev/null` +
    ` && readlink /usr/local/bin/deno || true`;
  const out = new Deno.Command("unshare", {
    args: ["-m", "sh", "-c", script],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  const linked = new TextDecoder().decode(out.stdout).trim();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr), linked: linked || null };
}

Deno.test({
  name: "bootstrap.sh links the pinned Deno into /usr/local/bin as root, or prints the PATH line",
  ignore: !canBootstrap,
  fn() {
    const pinned = `${ROOT}.tools/node_modules/.bin/deno`;
    const onPath = bootstrap("/usr/local/bin:/usr/bin:/bin");
    assert.equal(onPath.code, 0, onPath.stderr);
    assert.equal(onPath.linked, pinned, onPath.stderr);
    assert.match(onPath.stderr, /linked \/usr\/local\/bin\/deno to /);
    // With /usr/local/bin off PATH a link there would not help: the exact line to run instead.
    const offPath = bootstrap("/usr/bin:/bin");
    assert.equal(offPath.code, 0, offPath.stderr);
    assert.equal(offPath.linked, null);
    assert.ok(
      offPath.stderr.includes(`export PATH="${ROOT}.tools/node_modules/.bin:$PATH"`),
      offPath.stderr,
    );
  },
});
