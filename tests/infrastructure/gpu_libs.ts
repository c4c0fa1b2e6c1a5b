// infrastructure/install-gpu-libs.sh run against stand-ins for the system it changes: nvidia-smi,
// ldconfig (its cache a file), apt-get and apt-cache (a repository that is a list of package names,
// installs that add nvcc or a library to the cache), dpkg, curl, id and python3. Each stand-in
// records its arguments, so a test sees what the script would have installed on a real node.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

/** The script under test. */
export const INSTALL_GPU_LIBS = fileURLToPath(
  new URL("../../infrastructure/install-gpu-libs.sh", import.meta.url),
);

/** The machine a run pretends to be. */
export interface GpuNode {
  /** The CUDA version nvidia-smi reports; no nvidia-smi when absent (no driver). */
  driverCuda?: string;
  /** Library names the loader's cache has at the start (`libcublas.so.12`, `libnccl.so.2`). */
  libraries?: string[];
  /** Whether nvcc is in CUDA_HOME at the start. */
  nvcc?: boolean;
  /** Packages apt knows at the start; after `apt-get update`: `afterUpdate`; after NVIDIA's
   * keyring is installed: `nvidiaRepository`. */
  known?: string[];
  afterUpdate?: string[];
  nvidiaRepository?: string[];
  /** The libnccl2 versions `apt-cache madison` lists, newest first. */
  ncclVersions?: string[];
  /** Packages whose install puts nothing in place (a broken repository or image). */
  brokenInstalls?: string[];
  /** The user id (0: root). */
  uid?: number;
  /** Environment for the script (CUDA_VERSION, DTRAIN_CUDA_VERSION). */
  env?: Record<string, string>;
}

/** What a run did. */
export interface GpuLibsRun {
  code: number;
  stderr: string;
  /** Every call of a stand-in: its name and arguments. */
  calls: string[][];
  /** CUDA_HOME of the run (a temporary folder). */
  cudaHome: string;
}

/** The stand-ins, as bash; STATE is the run's folder of lists, CALLS the call log. */
const STUBS: Record<string, string> = {
  "nvidia-smi": 'echo "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: ' +
    '$(cat "$STATE/driver") |"',
  ldconfig: '[[ ${1:-} == -p ]] && cat "$STATE/ldcache"; exit 0',
  id: '[[ $1 == -u ]] && cat "$STATE/uid"',
  "apt-cache": [
    'if [[ $1 == madison ]]; then while read -r v; do echo " libnccl2 | $v | https://repo Packages";',
    '  done <"$STATE/nccl"; exit 0; fi',
    "[[ $1 == show ]] || exit 2; shift",
    'for p in "$@"; do grep -qxF "$p" "$STATE/known" || exit 100; done',
  ].join("\n"),
  "apt-get": [
    'if [[ $1 == update ]]; then [[ -f $STATE/after-update ]] && cat "$STATE/after-update" >>"$STATE/known"; exit 0; fi',
    "[[ $1 == install ]] || exit 2",
    'for p in "$@"; do',
    "  [[ $p == -* || $p == install ]] && continue",
    '  grep -qxF "${p%%=*}" "$STATE/known" || { echo "E: Unable to locate package $p" >&2; exit 100; }',
    '  grep -qxF "${p%%=*}" "$STATE/broken" && continue',
    "  case $p in",
    '    cuda-nvcc-*) mkdir -p "$CUDA_HOME/bin"; printf "#!/bin/sh\\n" >"$CUDA_HOME/bin/nvcc"; chmod +x "$CUDA_HOME/bin/nvcc" ;;',
    '    libcublas-*) printf "\\tlibcublas.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcublas.so.12\\n" >>"$STATE/ldcache" ;;',
    '    libnccl2=*) printf "\\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\\n" >>"$STATE/ldcache" ;;',
    "  esac",
    "done",
  ].join("\n"),
  dpkg: '[[ $1 == -i ]] && cat "$STATE/nvidia" >>"$STATE/known"',
  curl: 'while (($#)); do [[ $1 == -o ]] && : >"$2"; shift; done',
  python3: [
    '[[ "$1 $2" == "-m venv" ]] || exit 2',
    'mkdir -p "$3/bin"',
    "cat >\"$3/bin/pip\" <<'PIP'",
    "#!/usr/bin/env bash",
    'echo "pip $*" >>"$CALLS"',
    'root=$(dirname "$0")/../lib/python3.12/site-packages/nvidia',
    'for w in "$@"; do case $w in',
    '  nvidia-cublas*) mkdir -p "$root/cublas/lib"; : >"$root/cublas/lib/libcublas.so.12" ;;',
    '  nvidia-nccl*) mkdir -p "$root/nccl/lib"; : >"$root/nccl/lib/libnccl.so.2" ;;',
    "esac; done",
    "PIP",
    'chmod +x "$3/bin/pip"',
  ].join("\n"),
};

/**
 * Runs install-gpu-libs.sh with `args` on the machine `node` describes. PATH holds the stand-ins
 * and the system's own /usr/bin and /bin (not /usr/local/bin, where this machine may have nvcc).
 */
export async function runInstallGpuLibs(node: GpuNode, args: string[] = []): Promise<GpuLibsRun> {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-gpu-libs-" });
  const [bin, state, cudaHome, calls] = ["bin", "state", "cuda", "calls"].map((d) => `${dir}/${d}`);
  Deno.mkdirSync(bin);
  Deno.mkdirSync(state);
  const write = (name: string, lines: string[]) =>
    Deno.writeTextFileSync(`${state}/${name}`, lines.map((l) => `${l}\n`).join(""));
  write("driver", [node.driverCuda ?? ""]);
  write(
    "ldcache",
    (node.libraries ?? []).map((lib) => `\t${lib} (libc6,x86-64) => /usr/lib/${lib}`),
  );
  write("known", node.known ?? []);
  write("nvidia", node.nvidiaRepository ?? []);
  write("nccl", node.ncclVersions ?? []);
  write("broken", node.brokenInstalls ?? []);
  write("uid", [String(node.uid ?? 0)]);
  if (node.afterUpdate) write("after-update", node.afterUpdate);
  Deno.writeTextFileSync(calls, "");
  for (const [name, body] of Object.entries(STUBS)) {
    if (name === "nvidia-smi" && node.driverCuda === undefined) continue;
    Deno.writeTextFileSync(
      `${bin}/${name}`,
      `#!/usr/bin/env bash\necho "${name} $*" >>"$CALLS"\n${body}\n`,
    );
    Deno.chmodSync(`${bin}/${name}`, 0o755);
  }
  if (node.nvcc) {
    Deno.mkdirSync(`${cudaHome}/bin`, { recursive: true });
    Deno.writeTextFileSync(`${cudaHome}/bin/nvcc`, "#!/bin/sh\n");
    Deno.chmodSync(`${cudaHome}/bin/nvcc`, 0o755);
  }
  const output = await new Deno.Command("bash", {
    args: [INSTALL_GPU_LIBS, ...args],
    env: {
      PATH: `${bin}:/usr/bin:/bin`,
      STATE: state,
      CALLS: calls,
      CUDA_HOME: cudaHome,
      ...node.env,
    },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const recorded = Deno.readTextFileSync(calls).split("\n").filter((l) => l !== "");
  return {
    code: output.code,
    stderr: new TextDecoder().decode(output.stderr),
    calls: recorded.map((line) => line.split(" ")),
    cudaHome,
  };
}

/** The packages of the run's `apt-get install` (one call at most), or null when none ran. */
export function installed(run: GpuLibsRun): string[] | null {
  const installs = run.calls.filter(([name, verb]) => name === "apt-get" && verb === "install");
  assert.ok(installs.length <= 1, `apt-get install ran ${installs.length} times`);
  return installs.length ? installs[0].slice(2).filter((word) => !word.startsWith("-")) : null;
}

/**
 * Asserts that a node's setup script checks out dtrain, then runs install-gpu-libs.sh from the
 * checkout, then `make build`: the CUDA library is built only where nvcc is.
 */
export function assertGpuLibsBeforeBuild(setup: string, installDir = "/opt/dtrain"): void {
  const lines = setup.split("\n").map((line) => line.trim());
  const at = (command: string) => {
    const index = lines.findIndex((line) => line === command || line.startsWith(`${command} `));
    assert.ok(index >= 0, `no "${command}" in:\n${setup}`);
    return index;
  };
  const checkout = at(`git -C ${installDir} checkout`);
  const gpu = at(`${installDir}/infrastructure/install-gpu-libs.sh`);
  const build = at(`make -C ${installDir} build`);
  assert.ok(checkout < gpu && gpu < build, "checkout, then install-gpu-libs.sh, then make build");
}
