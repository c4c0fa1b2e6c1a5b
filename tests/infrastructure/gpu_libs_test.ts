// What the recipes do for `--device cuda`: infrastructure/install-gpu-libs.sh, run against
// stand-ins for the node's driver, loader cache and apt, installs exactly what is missing; the
// Kubernetes image runs it before its build; the SLURM script refuses a GPU job without the CUDA
// library and hands the tasks the wheels' venv. (That cloud-init runs it on every cloud, between
// the checkout and `make build`, is asserted with the rest of each cloud's user data in
// cloud_init_test.ts.)
import assert from "node:assert/strict";
import { resolve } from "node:path";
import {
  assertGpuLibsBeforeBuild,
  INSTALL_GPU_LIBS,
  installed,
  runInstallGpuLibs,
} from "./gpu_libs.ts";
import { fakeCheckout, hasCommand, runScript } from "./shell.ts";
import { NEBIUS_DIR } from "./start_training.ts";

const INFRA_DIR = resolve(NEBIUS_DIR, "..");
const NCCL_BUILDS = ["2.23.4-1+cuda12.6", "2.21.5-1+cuda12.4", "2.21.5-1+cuda12.2"];
const CUDA_12_4 = ["cuda-nvcc-12-4", "cuda-cudart-dev-12-4", "libcublas-12-4", "libnccl2"];

/** The distribution part of NVIDIA's repository URL for this machine (`debian12`, `ubuntu2404`). */
function distro(): string {
  const release = Deno.readTextFileSync("/etc/os-release");
  const field = (name: string) =>
    new RegExp(`^${name}="?([^"\\n]*)"?$`, "m").exec(release)?.[1] ?? "";
  return field("ID") + field("VERSION_ID").replaceAll(".", "");
}

/** Whether this machine's apt already lists NVIDIA's repository (the script then never adds it). */
function hasNvidiaRepository(): boolean {
  return new Deno.Command("bash", {
    args: ["-c", "grep -rqs developer.download.nvidia.com/compute/cuda/repos /etc/apt"],
  }).outputSync().success;
}

Deno.test({
  name: `a bare GPU node gets nvcc, cuBLAS and NCCL for its driver's CUDA from NVIDIA's repository${
    hasNvidiaRepository() ? " [skipped: this machine's apt lists NVIDIA's repository]" : ""
  }`,
  ignore: hasNvidiaRepository(),
}, async () => {
  const run = await runInstallGpuLibs({
    driverCuda: "12.4",
    nvidiaRepository: CUDA_12_4,
    ncclVersions: NCCL_BUILDS,
  });
  assert.equal(run.code, 0, run.stderr);
  // The lists are refreshed first, the repository added only when that did not help.
  const names = run.calls.map(([name, verb]) => `${name} ${verb}`);
  const update = names.indexOf("apt-get update"), keyring = names.indexOf("dpkg -i");
  assert.ok(update >= 0 && keyring > update, names.join("; "));
  const curl = run.calls.find(([name]) => name === "curl")!;
  assert.ok(
    curl.includes(
      `https://developer.download.nvidia.com/compute/cuda/repos/${distro()}/x86_64/` +
        "cuda-keyring_1.1-1_all.deb",
    ),
    curl.join(" "),
  );
  assert.deepEqual(installed(run), [
    "cuda-nvcc-12-4",
    "cuda-cudart-dev-12-4",
    "libcublas-12-4",
    "libnccl2=2.21.5-1+cuda12.4",
  ]);
  assert.match(run.stderr, new RegExp(`nvcc ${run.cudaHome}/bin/nvcc; cuBLAS found; NCCL found`));
});

Deno.test("NVIDIA's runtime image gets nvcc and the CUDA headers of its CUDA_VERSION, nothing else", async () => {
  const run = await runInstallGpuLibs({
    libraries: ["libcublas.so.12", "libnccl.so.2"],
    known: ["cuda-nvcc-12-6", "cuda-cudart-dev-12-6"],
    env: { CUDA_VERSION: "12.6.3" },
  });
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(installed(run), ["cuda-nvcc-12-6", "cuda-cudart-dev-12-6"]);
  assert.ok(!run.calls.some(([name]) => name === "curl" || name === "dpkg"), "added a repository");
});

Deno.test("a node with nvcc, cuBLAS and NCCL installs nothing; a chosen version wins over the driver's", async () => {
  const run = await runInstallGpuLibs({
    driverCuda: "12.8",
    nvcc: true,
    libraries: ["libcublas.so.13", "libnccl.so.2"],
    env: { DTRAIN_CUDA_VERSION: "13.0" },
  });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(installed(run), null);
  assert.ok(!run.calls.some(([name]) => name === "apt-get"), "apt-get ran");
  assert.match(run.stderr, /nothing to install for CUDA 13\.0: nvcc, cuBLAS and NCCL are there/);
});

Deno.test("NCCL comes from the newest build of the driver's CUDA major when none is for its minor", async () => {
  const run = await runInstallGpuLibs({
    driverCuda: "12.5",
    nvcc: true,
    libraries: ["libcublas.so.12"],
    known: ["libnccl2"],
    ncclVersions: ["2.23.4-1+cuda13.0", "2.23.4-1+cuda12.6", "2.22.3-1+cuda12.6"],
  });
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(installed(run), ["libnccl2=2.23.4-1+cuda12.6"]);
});

Deno.test("install-gpu-libs.sh fails, naming what is missing, when the install leaves a library out", async () => {
  const run = await runInstallGpuLibs({
    driverCuda: "12.4",
    known: CUDA_12_4,
    ncclVersions: NCCL_BUILDS,
    brokenInstalls: ["libcublas-12-4"],
  });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /cuBLAS missing; NCCL found/);
  assert.match(run.stderr, /still missing after the install; set DTRAIN_CUBLAS_LIB/);
});

Deno.test("install-gpu-libs.sh says why it cannot start: no CUDA version known, or no root for apt", async () => {
  const unknown = await runInstallGpuLibs({});
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /cannot tell which CUDA to install for: .*DTRAIN_CUDA_VERSION/);
  assert.equal(installed(unknown), null);
  const user = await runInstallGpuLibs({ driverCuda: "12.4", uid: 1000 });
  assert.equal(user.code, 1);
  assert.match(user.stderr, /needs root and apt-get; without root: .* --wheels DIR/);
  const bad = await runInstallGpuLibs({ driverCuda: "12.4" }, ["--bogus"]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /unknown argument '--bogus'/);
});

Deno.test("--wheels DIR makes a venv of NVIDIA's cuBLAS and NCCL wheels for the driver's CUDA, without root", async () => {
  for (
    const [cuda, wheels] of [
      ["12.4", "nvidia-cublas-cu12 nvidia-nccl-cu12"],
      ["13.0", "nvidia-cublas==13.* nvidia-nccl-cu13"],
    ]
  ) {
    const venv = `${Deno.makeTempDirSync({ prefix: "dtrain-wheels-" })}/venv`;
    const run = await runInstallGpuLibs({ driverCuda: cuda, uid: 1000 }, ["--wheels", venv]);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.calls.find(([name]) => name === "pip"), [
      "pip",
      "install",
      "--quiet",
      ...wheels.split(" "),
    ]);
    assert.ok(!run.calls.some(([name]) => name === "apt-get"), "apt-get ran");
    assert.match(run.stderr, /found .*\/nvidia\/cublas\/lib\/libcublas\.so\.12/);
    assert.match(run.stderr, /put .*\/venv\/bin first on PATH/);
  }
});

Deno.test("the Kubernetes image runs install-gpu-libs.sh from its checkout before make build", () => {
  const dockerfile = Deno.readTextFileSync(`${INFRA_DIR}/kubernetes/Dockerfile`);
  const from = /^FROM (\S+)$/m.exec(dockerfile)?.[1] ?? "";
  assert.match(from, /^nvidia\/cuda:\d+\.\d+\.\d+-runtime-ubuntu/);
  // Its RUN lines as the shell commands they are, continuation lines joined.
  const commands = dockerfile.replaceAll("\\\n", " ").split("\n")
    .filter((line) => line.startsWith("RUN ") || line.startsWith("COPY "))
    .flatMap((line) => line.replace(/^RUN /, "").split("&&").map((c) => c.trim()));
  const copy = commands.indexOf("COPY . /opt/dtrain");
  const install = commands.indexOf("/opt/dtrain/infrastructure/install-gpu-libs.sh");
  const build = commands.indexOf("make -C /opt/dtrain build");
  assert.ok(copy >= 0 && copy < install && install < build, commands.join("\n"));
  assert.ok(commands.some((c) => c.includes("curl")), "curl (for NVIDIA's keyring) is installed");
  assertGpuLibsBeforeBuild(
    `git -C /opt/dtrain checkout\n${commands.slice(install).join("\n")}`,
  );
});

/** The SLURM script with stand-in scontrol and srun; srun records the tasks' PATH. */
async function runSbatch(dir: string, env: Record<string, string>) {
  Deno.mkdirSync(`${dir}/bin`, { recursive: true });
  const stubs: Record<string, string> = {
    scontrol: "echo gpu-node-01",
    srun: 'echo "$PATH" >"$DENO_CALLS_DIR/../srun-path"\n' +
      'while [[ "$1" == -* ]]; do shift; done\nSLURM_NODEID=0 "$@"',
  };
  for (const [name, body] of Object.entries(stubs)) {
    Deno.writeTextFileSync(`${dir}/bin/${name}`, `#!/usr/bin/env bash\n${body}\n`);
    Deno.chmodSync(`${dir}/bin/${name}`, 0o755);
  }
  return await runScript(`${INFRA_DIR}/slurm/dtrain.sbatch`, [], {
    PATH: `${dir}/bin:${Deno.env.get("PATH")}`,
    SLURM_JOB_NODELIST: "gpu-node-01",
    SLURM_NNODES: "1",
    SLURM_SUBMIT_DIR: `${dir}/checkout`,
    SHARED_DIR: `${dir}/shared`,
    ...env,
  }, `${dir}/calls`);
}

Deno.test("SLURM: --device cuda without build/libdtrain_cuda.so stops before srun, saying how to build it", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-slurm-gpu-" });
  fakeCheckout(`${dir}/checkout`);
  const run = await runSbatch(dir, {});
  assert.equal(run.code, 1);
  assert.match(run.stderr, /--device cuda needs .*build\/libdtrain_cuda\.so; build it once where/);
  assert.equal(run.denoCalls.length, 0);
  const cpu = await runSbatch(dir, { DEVICE: "cpu" });
  assert.equal(cpu.code, 0, cpu.stderr);
  assert.equal(cpu.denoCalls.length, 1);
});

Deno.test("SLURM: the tasks get GPU_LIBS' venv first on PATH, where dtrain looks for the wheels", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-slurm-gpu-" });
  fakeCheckout(`${dir}/checkout`);
  Deno.mkdirSync(`${dir}/checkout/build`);
  Deno.writeTextFileSync(`${dir}/checkout/build/libdtrain_cuda.so`, "");
  const venv = `${dir}/checkout/.tools/gpu-libs`;
  Deno.mkdirSync(`${venv}/bin`, { recursive: true });
  Deno.writeTextFileSync(`${venv}/bin/python3`, "#!/bin/sh\n");
  Deno.chmodSync(`${venv}/bin/python3`, 0o755);
  const run = await runSbatch(dir, {});
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.denoCalls.length, 1);
  assert.ok(Deno.readTextFileSync(`${dir}/srun-path`).startsWith(`${venv}/bin:`));
});

Deno.test({
  name: "shellcheck finds nothing in install-gpu-libs.sh",
  ignore: !hasCommand("shellcheck"),
}, async () => {
  const output = await new Deno.Command("shellcheck", {
    args: [INSTALL_GPU_LIBS],
    stdout: "piped",
  }).output();
  assert.ok(output.success, new TextDecoder().decode(output.stdout));
});
