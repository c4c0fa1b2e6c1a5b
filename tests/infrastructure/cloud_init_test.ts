// Each root's nodes as a plan renders them: the cloud-init user data of every node of a 2- and
// 3-node cluster on each cloud (and of the single-GPU VM) launches the node with its rank, the
// node count, the master's reserved address and the snapshot on the shared filesystem, which it
// mounts; installs dtrain and the GPU libraries before its build; keeps the job token in a
// root-only file; and its scripts pass bash -n and shellcheck.
import assert from "node:assert/strict";
import { loadConfig } from "./terraform.ts";
import { evaluateAttribute } from "./terraform_plan.ts";
import { bashSyntaxErrors, flagMap, hasCommand, launchArguments } from "./shell.ts";
import {
  cloud,
  CLUSTERS,
  exampleValues,
  fileOf,
  fixturesOf,
  INFRA_DIR,
  JOB_ENV,
  MASTER_ADDR,
  renderCluster,
  renderNode,
  SETUP_SCRIPT,
  sshKeyPath,
  START_SCRIPT,
  TOKEN,
  trainConfig,
  UNIT,
} from "./clusters.ts";
import { assertGpuLibsBeforeBuild } from "./gpu_libs.ts";

const SHELLCHECK = hasCommand("shellcheck");

Deno.test("a 2-node cluster's start-up scripts launch each node with its rank, the node count and the master's address", async () => {
  const values = await exampleValues(cloud("Nebius").dir);
  assert.equal(values.cluster_size, 2);
  const nodes = await renderCluster(values);
  assert.equal(nodes.length, 2);
  for (const [rank, node] of nodes.entries()) {
    assert.ok(node.userData.startsWith("#cloud-config\n"), `node ${rank}: not a cloud-config`);
    const args = launchArguments(fileOf(node, START_SCRIPT));
    assert.deepEqual(Object.fromEntries(flagMap(args)), {
      "nnodes": "2",
      "node-rank": String(rank),
      "nproc-per-node": "8",
      "master-addr": MASTER_ADDR,
      "master-port": "29500",
      "max-restarts": "3",
      "log-dir": `/mnt/shared/dtrain/logs/node-${rank}`,
      "snapshot": "/mnt/shared/dtrain/snapshot.safetensors",
      "device": "cuda",
      // The example's train_args: the MLP job.
      "epochs": "10",
      "save-every": "1",
      "batch-size": "64",
    });
    const config = trainConfig(args);
    assert.deepEqual(
      [config.nnodes, config.nodeRank, config.nprocPerNode, config.masterAddr, config.masterPort],
      [2, rank, 8, MASTER_ADDR, 29500],
    );
  }
});

Deno.test("a 3-node cluster gives ranks 0 to 2 the same master and node count", async () => {
  const nodes = await renderCluster({
    ...await exampleValues(cloud("Nebius").dir),
    cluster_size: 3,
  });
  const launches = nodes.map((node) => flagMap(launchArguments(fileOf(node, START_SCRIPT))));
  assert.deepEqual(launches.map((f) => f.get("node-rank")), ["0", "1", "2"]);
  assert.deepEqual(launches.map((f) => f.get("nnodes")), ["3", "3", "3"]);
  assert.deepEqual(launches.map((f) => f.get("master-addr")), [
    MASTER_ADDR,
    MASTER_ADDR,
    MASTER_ADDR,
  ]);
});

for (const root of CLUSTERS) {
  Deno.test(`${root.name}: 2- and 3-node clusters launch each node with its rank, the node count, 8 GPUs and the reserved master address`, async () => {
    for (const size of [2, 3]) {
      const values = { ...await exampleValues(root.dir), cluster_size: size };
      const nodes = await renderCluster(values, root);
      assert.equal(nodes.length, size);
      for (const [rank, node] of nodes.entries()) {
        assert.ok(node.userData.startsWith("#cloud-config\n"), `node ${rank}: not a cloud-config`);
        const args = launchArguments(fileOf(node, START_SCRIPT));
        const config = trainConfig(args);
        assert.deepEqual(
          [config.nnodes, config.nodeRank, config.nprocPerNode, config.masterAddr, config.device],
          [size, rank, 8, MASTER_ADDR, "cuda"],
        );
        assert.equal(config.snapshot, "/mnt/shared/dtrain/snapshot.safetensors");
        assert.equal(flagMap(args).get("log-dir"), `/mnt/shared/dtrain/logs/node-${rank}`);
        const setup = fileOf(node, SETUP_SCRIPT);
        assert.ok(setup.includes(`echo '${root.fstab}' >>/etc/fstab`), setup);
        assertGpuLibsBeforeBuild(setup);
        assert.equal(await bashSyntaxErrors(setup), "", `${root.name} setup-node.sh`);
        assert.deepEqual(node.files.get(JOB_ENV), {
          content: `DTRAIN_TOKEN=${TOKEN}\n`,
          permissions: "0600",
        });
        assert.equal(node.userData.split(TOKEN).length, 2, "the token appears once");
      }
    }
  });
}

Deno.test("cluster cloud-init installs dtrain, mounts the shared filesystem and starts the unit on every boot", async () => {
  const nebius = cloud("Nebius");
  const config = await loadConfig(nebius.dir);
  const values = await exampleValues(nebius.dir);
  const [node] = await renderCluster(values, nebius);
  const filesystems = await evaluateAttribute(config, nebius.address, "filesystems", {
    values,
    countIndex: 0,
    fixtures: fixturesOf(nebius),
  }) as Record<string, string>[];
  const setup = fileOf(node, SETUP_SCRIPT);
  assert.match(setup, new RegExp(`'${filesystems[0].mount_tag} /mnt/shared virtiofs `));
  assert.match(setup, new RegExp(`git clone ${values.repo_url} /opt/dtrain`));
  assert.match(setup, /git -C \/opt\/dtrain checkout main/);
  assert.match(setup, /make -C \/opt\/dtrain build/);
  // --device cuda: nvcc, cuBLAS and NCCL where the image lacks them, before the CUDA library's build.
  assertGpuLibsBeforeBuild(setup);
  assert.ok(
    (node.cloudInit.packages as string[]).includes("curl"),
    "curl fetches NVIDIA's keyring",
  );
  assert.match(setup, /systemctl enable --now dtrain-train\.service/);
  const unit = fileOf(node, UNIT);
  assert.match(unit, new RegExp(`^ExecStart=${START_SCRIPT}$`, "m"));
  assert.match(unit, new RegExp(`^EnvironmentFile=${JOB_ENV}$`, "m"));
  assert.match(unit, /^RequiresMountsFor=\/mnt\/shared$/m);
  assert.match(unit, /^WantedBy=multi-user\.target$/m);
  assert.deepEqual(node.cloudInit.runcmd, [["bash", SETUP_SCRIPT]]);
  const users = node.cloudInit.users as { name: string; ssh_authorized_keys: string[] }[];
  assert.equal(users[0].name, values.ssh_user);
  assert.deepEqual(users[0].ssh_authorized_keys, [Deno.readTextFileSync(sshKeyPath).trim()]);
});

Deno.test("cloud-init keeps the job token in a root-only env file and nowhere else", async () => {
  for (const node of await renderCluster(await exampleValues(cloud("Nebius").dir))) {
    const env = node.files.get(JOB_ENV);
    assert.deepEqual(env, { content: `DTRAIN_TOKEN=${TOKEN}\n`, permissions: "0600" });
    assert.equal(node.userData.split(TOKEN).length, 2, "the token appears once in the user data");
    for (const [path, file] of node.files) {
      if (path !== JOB_ENV) assert.ok(!file.content.includes(TOKEN), `${path} holds the token`);
    }
    assert.doesNotMatch(fileOf(node, START_SCRIPT), /set -[a-z]*x|set -o xtrace/);
  }
});

Deno.test("the single-GPU VM renders one node launching one process with itself as master", async () => {
  const vm = cloud("Nebius single GPU");
  const config = await loadConfig(vm.dir);
  const values = await exampleValues(vm.dir);
  const node = await renderNode(config, vm, values, 0);
  const args = launchArguments(fileOf(node, START_SCRIPT));
  const flags = flagMap(args);
  assert.equal(trainConfig(args).nprocPerNode, 1);
  assert.equal(flags.get("nnodes"), "1");
  assert.equal(flags.get("node-rank"), "0");
  assert.equal(flags.get("nproc-per-node"), "1");
  assert.equal(flags.get("master-addr"), "127.0.0.1");
  assert.equal(flags.get("snapshot"), "/mnt/shared/dtrain/snapshot.safetensors");
  assert.equal(node.files.get(JOB_ENV)?.content, `DTRAIN_TOKEN=${TOKEN}\n`);
  const setup = fileOf(node, SETUP_SCRIPT);
  assert.ok(setup.includes(`echo '${vm.fstab}' >>/etc/fstab`), setup);
  assertGpuLibsBeforeBuild(setup);
});

Deno.test("the rendered start-up and setup scripts pass bash -n", async () => {
  const [node] = await renderCluster(await exampleValues(cloud("Nebius").dir));
  for (const path of [START_SCRIPT, SETUP_SCRIPT]) {
    assert.equal(await bashSyntaxErrors(fileOf(node, path)), "", path);
  }
  assert.notEqual(await bashSyntaxErrors("if then fi"), "", "bash -n must catch a broken script");
});

Deno.test({
  name: "shellcheck finds nothing in the rendered scripts or the SLURM batch script",
  ignore: !SHELLCHECK,
  fn: async () => {
    const dir = Deno.makeTempDirSync({ prefix: "dtrain-shellcheck-" });
    const [node] = await renderCluster(await exampleValues(cloud("Nebius").dir));
    const scripts = [`${INFRA_DIR}/slurm/dtrain.sbatch`];
    for (const path of [START_SCRIPT, SETUP_SCRIPT]) {
      scripts.push(`${dir}/${path.slice(path.lastIndexOf("/") + 1)}`);
      Deno.writeTextFileSync(scripts.at(-1)!, fileOf(node, path));
    }
    const output = await new Deno.Command("shellcheck", { args: scripts, stdout: "piped" })
      .output();
    assert.ok(output.success, new TextDecoder().decode(output.stdout));
  },
});
