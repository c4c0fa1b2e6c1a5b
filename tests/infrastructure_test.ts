// The infrastructure under infrastructure/, checked offline: the Terraform parses and is
// consistent, its cloud-init renders for a 2-node cluster into start-up scripts that launch each
// node correctly, and the start-up, SLURM and Kubernetes recipes run or agree with each other.
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { UnsupportedError, type Value } from "./infrastructure/expression.ts";
import { renderTemplate, templateVariables } from "./infrastructure/template.ts";
import {
  configTree,
  evaluateAttribute,
  leakingOutputs,
  loadConfig,
  moduleCallMismatches,
  parseConfig,
  templatefileMismatches,
  undeclaredReferences,
  ValidationEvaluationError,
  validationFailures,
  VARIABLE_TYPES,
  variableValues,
} from "./infrastructure/terraform.ts";
import {
  bashSyntaxErrors,
  fakeCheckout,
  flagMap,
  hasCommand,
  launchArguments,
  runSbatch,
  runScript,
  shellWords,
} from "./infrastructure/shell.ts";
import {
  renderStartTraining,
  START_TRAINING_TEMPLATE,
  type StartTrainingVars,
} from "./infrastructure/start_training.ts";
import {
  AWS_DIR,
  CLOUDS,
  CLUSTER_DIR,
  CONFIG_DIRS,
  exampleValues,
  fileOf,
  FIXTURES,
  GCP_DIR,
  INFRA_DIR,
  JOB_ENV,
  MASTER_ADDR,
  PROVIDERS,
  renderCluster,
  renderNode,
  SETUP_SCRIPT,
  SINGLE_GPU_DIR,
  sshKeyPath,
  START_SCRIPT,
  TOKEN,
  trainConfig,
  UNIT,
} from "./infrastructure/clusters.ts";
import { assertGpuLibsBeforeBuild } from "./infrastructure/gpu_libs.ts";

const SHELLCHECK = hasCommand("shellcheck");

// ---- helpers ----

/** Start-up script values for a run on this machine, on loopback, with a fake checkout. */
function localVars(dir: string, overrides: Partial<StartTrainingVars>): StartTrainingVars {
  return {
    install_dir: `${dir}/checkout`,
    nnodes: 2,
    node_rank: 0,
    nproc_per_node: 1,
    master_addr: "127.0.0.1",
    master_port: 29500,
    connect_attempts: 3,
    connect_interval_s: 1,
    max_restarts: 0,
    log_dir: `${dir}/shared/logs/node-${overrides.node_rank ?? 0}`,
    device: "cpu",
    train_args: ["--epochs", "1", "--save-every", "1", "--batch-size", "8"],
    snapshot_path: `${dir}/shared/snapshot.safetensors`,
    ...overrides,
  };
}

/** Renders the start-up script into a fresh directory with a fake checkout, and runs it. */
async function runStartTraining(
  overrides: Partial<StartTrainingVars>,
  env: Record<string, string>,
) {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-start-" });
  const vars = localVars(dir, overrides);
  fakeCheckout(vars.install_dir);
  const script = await renderStartTraining(vars);
  Deno.writeTextFileSync(`${dir}/start-training.sh`, script);
  const run = await runScript(`${dir}/start-training.sh`, [], env, `${dir}/calls`);
  return { dir, vars, script, run };
}

/** A loopback port with nothing listening on it (one just freed). */
function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

// ---- Terraform: parsing and static consistency ----

Deno.test("every .tf file parses as HCL and declares every variable, local, resource and module it references", async () => {
  for (const dir of CONFIG_DIRS) {
    const config = await loadConfig(dir);
    assert.ok(config.files.size >= 4, `${dir}: expected versions, variables, main and outputs`);
    for (const each of configTree(config)) {
      assert.deepEqual(await undeclaredReferences(each), [], each.dir);
      assert.deepEqual(moduleCallMismatches(each), [], each.dir);
    }
    const providers = (config.files.get("versions.tf")!.terraform as Record<string, unknown>[])[0]
      .required_providers as Record<string, { source: string }>[];
    const [name, source] = PROVIDERS[dir];
    assert.equal(providers[0][name].source, source);
    assert.equal(providers[0].random.source, "hashicorp/random");
  }
});

Deno.test("the reference check reports undeclared var, local and resource references, and bad HCL is rejected", async () => {
  const config = await parseConfig("/nonexistent", {
    "versions.tf":
      'terraform {\n  required_providers {\n    nebius = { source = "nebius/nebius" }\n  }\n}\n',
    "main.tf": [
      'variable "declared" {\n  type = string\n}',
      "locals {\n  known = var.declared\n}",
      'resource "nebius_compute_v1_disk" "boot" {\n  name = "${local.known}-${local.unknown}"\n' +
      "  size_gibibytes = var.undeclared\n  parent_id = nebius_compute_v1_filesystem.missing.id\n}",
    ].join("\n"),
  });
  const problems = await undeclaredReferences(config);
  assert.equal(problems.length, 3, problems.join("\n"));
  assert.match(problems.join("\n"), /local\.unknown/);
  assert.match(problems.join("\n"), /var\.undeclared/);
  assert.match(problems.join("\n"), /nebius_compute_v1_filesystem\.missing/);
  await assert.rejects(
    parseConfig("/nonexistent", { "bad.tf": 'resource "a" "b" {\n  x = \n}\n' }),
  );
});

Deno.test("every templatefile() call passes exactly the variables its template reads", async () => {
  for (const dir of CONFIG_DIRS) {
    for (const config of configTree(await loadConfig(dir))) {
      assert.deepEqual(await templatefileMismatches(config), [], config.dir);
    }
  }
});

Deno.test("the module-call check reports an argument the module lacks and a required variable not passed", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-tf-" });
  Deno.mkdirSync(`${dir}/child`);
  Deno.writeTextFileSync(
    `${dir}/child/main.tf`,
    'variable "needed" {\n  type = string\n}\nvariable "optional" {\n  type = number\n  default = 1\n}\n',
  );
  const config = await parseConfig(dir, {
    "main.tf": 'module "c" {\n  source = "./child"\n  count = 2\n  extra = 1\n}\n' +
      "locals {\n  x = module.missing.out\n}\n",
  });
  assert.deepEqual(moduleCallMismatches(config), [
    `module c passes extra, which ${dir}/child does not declare`,
    "module c does not pass needed, which has no default",
  ]);
  assert.match((await undeclaredReferences(config)).join("\n"), /module\.missing/);
});

Deno.test("no block is copied: every variable and templatefile() call lives in one file, linked where shared", () => {
  const seen = new Map<string, string>();
  const problems: string[] = [];
  const templatefiles: string[] = [];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(dir)) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      if (!entry.isFile || !entry.name.endsWith(".tf")) continue; // links are the sharing
      const source = Deno.readTextFileSync(path);
      if (source.includes("templatefile(")) templatefiles.push(path);
      for (const block of source.matchAll(/^variable "([^"]+)" \{\n[\s\S]*?^\}$/gm)) {
        const earlier = seen.get(block[0]);
        if (earlier) problems.push(`variable ${block[1]} is in ${earlier} and ${path}`);
        seen.set(block[0], path);
      }
    }
  };
  walk(INFRA_DIR);
  assert.deepEqual(problems, []);
  assert.deepEqual(templatefiles.map((p) => p.slice(p.indexOf("/infrastructure/") + 1)), [
    "infrastructure/modules/cloud_init/main.tf",
  ]);
});

Deno.test("the templatefile check reports a variable the template reads but is not passed, and one passed but unread", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-tf-" });
  Deno.writeTextFileSync(`${dir}/t.tftpl`, "a=${a} c=${c} escaped=$${b}\n");
  const config = await parseConfig(dir, {
    "main.tf": 'locals {\n  x = templatefile("${path.module}/t.tftpl", { a = 1, b = 2 })\n}\n',
  });
  const problems = await templatefileMismatches(config);
  assert.equal(problems.length, 2, problems.join("\n"));
  assert.match(problems[0], /reads c, which is not passed/);
  assert.match(problems[1], /b is passed to t\.tftpl, which never reads it/);
});

Deno.test("no output carries the job token unless it is marked sensitive", async () => {
  for (const dir of CONFIG_DIRS) {
    const config = await loadConfig(dir);
    for (const each of configTree(config)) {
      assert.deepEqual(await leakingOutputs(each), [], each.dir);
    }
    assert.equal(
      config.outputs.get("dtrain_token")?.sensitive,
      true,
      `${dir}: dtrain_token output`,
    );
    assert.ok(config.resources.has("random_password.token"), `${dir}: token made by Terraform`);
  }
});

Deno.test("the sensitive-output check reports a token output directly, through a local, or via user data", async () => {
  const config = await parseConfig("/nonexistent", {
    "main.tf": [
      'resource "random_password" "token" {\n  length = 32\n}',
      'variable "key" {\n  type = string\n  sensitive = true\n}',
      'locals {\n  wrapped = "t=${random_password.token.result}"\n  again = local.wrapped\n}',
      'output "direct" {\n  value = random_password.token.result\n}',
      'output "through_local" {\n  value = local.again\n}',
      'output "user_data" {\n  value = nebius_compute_v1_instance.node[0].cloud_init_user_data\n}',
      'output "variable" {\n  value = var.key\n}',
      'output "fine" {\n  value = random_password.token.result\n  sensitive = true\n}',
    ].join("\n"),
  });
  const problems = await leakingOutputs(config);
  assert.deepEqual(problems.map((p) => p.split(" ")[1]).sort(), [
    "direct",
    "through_local",
    "user_data",
    "variable",
  ]);
});

// ---- Terraform: variables ----

Deno.test("every variable has a description, a primitive type or a list of strings, and at least one validation", async () => {
  for (const dir of CONFIG_DIRS) {
    for (const [name, variable] of (await loadConfig(dir)).variables) {
      assert.ok(String(variable.description ?? "").length > 10, `${dir}: ${name} description`);
      const type = String(variable.type).replace(/^\$\{(.*)\}$/, "$1");
      assert.ok(VARIABLE_TYPES.includes(type), `${dir}: ${name} type ${type}`);
      assert.ok(
        (variable.validation as unknown[] | undefined)?.length,
        `${dir}: ${name} validation`,
      );
    }
  }
});

Deno.test("the example tfvars set only declared variables, with their types, and pass every validation", async () => {
  for (const dir of CONFIG_DIRS) {
    const config = await loadConfig(dir);
    const values = await exampleValues(dir);
    variableValues(config, values);
    assert.deepEqual(await validationFailures(config, values), [], dir);
    const required = [...config.variables].filter(([, v]) => !Object.hasOwn(v, "default"));
    for (const [name] of required) {
      assert.ok(Object.hasOwn(values, name), `${dir}: example lacks ${name}`);
    }
  }
});

Deno.test("cluster variable validations reject bad sizes, presets, images, disks, users and train settings", async () => {
  const config = await loadConfig(CLUSTER_DIR);
  const good = await exampleValues(CLUSTER_DIR);
  const bad: [Record<string, Value>, RegExp][] = [
    [{ cluster_size: 0 }, /^cluster_size:/],
    [{ cluster_size: 1.5 }, /^cluster_size:/],
    [{ gpus_per_node: 3, node_preset: "3gpu-48vcpu-600gb" }, /^gpus_per_node:/],
    [{ node_preset: "4gpu-64vcpu-800gb" }, /^node_preset: .*as many GPUs/],
    [{ node_preset: "big" }, /^node_preset: .*look like/],
    [{ image_family: "debian12" }, /^image_family:/],
    [{ master_boot_disk_gib: 10 }, /^master_boot_disk_gib:/],
    [{ worker_boot_disk_gib: 10 }, /^worker_boot_disk_gib:/],
    [{ shared_fs_size_gib: 1 }, /^shared_fs_size_gib:/],
    [{ ssh_user: "root" }, /^ssh_user:/],
    [{ ssh_public_key_path: "/nonexistent/key.pub" }, /^ssh_public_key_path:/],
    [{ repo_url: "https://example.com/a b.git" }, /^repo_url:/],
    [{ repo_ref: "main; rm -rf /" }, /^repo_ref:/],
    [{ train_args: ["--nnodes", "4"] }, /^train_args: .*the recipe sets them/],
    [{ train_args: ["--epochs", "1\n"] }, /^train_args: .*control characters/],
    [{ max_restarts: -1 }, /^max_restarts:/],
    [{ project_id: "my-project" }, /^project_id:/],
    [{ infiniband_fabric: "" }, /^infiniband_fabric:/],
  ];
  for (const [change, expected] of bad) {
    const failures = await validationFailures(config, { ...good, ...change });
    const name = Object.keys(change)[0];
    const context = `${JSON.stringify(change)}: ${failures.join("; ")}`;
    assert.ok(failures.length > 0, context);
    assert.ok(failures.every((failure) => failure.startsWith(`${name}: `)), context);
    assert.ok(failures.some((failure) => expected.test(failure)), context);
  }
  assert.deepEqual(await validationFailures(config, { ...good, cluster_size: 1 }), []);
  assert.throws(() => variableValues(config, { ...good, cluster_size: "2" }), /must be a number/);
  assert.throws(
    () => variableValues(config, { ...good, train_args: ["--epochs", 2] }),
    /train_args must be a list\(string\)/,
  );
  assert.throws(() => variableValues(config, { ...good, nodes: 2 }), /nodes is not declared/);
});

Deno.test("a validation condition that does not evaluate is an error, never a failed validation", async () => {
  const config = await loadConfig(CLUSTER_DIR);
  const bad = { ...await exampleValues(CLUSTER_DIR), node_preset: "big" };
  // A planted evaluator bug: regex() crashes. The negative case must fail loudly, even where
  // the call sits inside can(), instead of passing as "node_preset rejected".
  const crashing = {
    regex: () => Promise.reject(new TypeError("planted evaluator bug")),
  };
  await assert.rejects(validationFailures(config, bad, crashing), (error) => {
    assert.ok(error instanceof ValidationEvaluationError);
    assert.match(error.message, /^node_preset: .*planted evaluator bug/m);
    return true;
  });
  // Terraform's own error outside can() is an error too, not the rule's message.
  const erroring = await parseConfig("/nonexistent", {
    "main.tf": 'variable "n" {\n  type = string\n  validation {\n' +
      '    condition     = tonumber(var.n) > 0\n    error_message = "n must be positive."\n  }\n}\n',
  });
  await assert.rejects(validationFailures(erroring, { n: "x" }), /n: tonumber\(var\.n\) > 0: /);
  assert.deepEqual(await validationFailures(erroring, { n: "-1" }), ["n: n must be positive."]);
  assert.deepEqual(await validationFailures(erroring, { n: "2" }), []);
});

Deno.test("single-GPU variable validations accept one-GPU presets only", async () => {
  const config = await loadConfig(SINGLE_GPU_DIR);
  const good = await exampleValues(SINGLE_GPU_DIR);
  const failures = await validationFailures(config, { ...good, preset: "8gpu-128vcpu-1600gb" });
  assert.equal(failures.length, 1);
  assert.match(failures[0], /^preset:/);
});

// ---- templates ----

Deno.test("the template renderer interpolates, unescapes, and refuses unknown names and directives", async () => {
  assert.equal(
    await renderTemplate("n=${n} s=${jsonencode(s)} $${kept} %%{kept}", { n: 2, s: "a<b" }, "t"),
    'n=2 s="a\\u003cb" ${kept} %{kept}',
  );
  assert.deepEqual(
    await templateVariables("${a} ${f.x} $${b} ${jsonencode(c)}", "t"),
    new Set(["a", "f", "c"]),
  );
  // A for expression's own names are not the template's variables; replace() takes no $ patterns.
  const quoted =
    '${join(" ", [for a in xs : a == "" ? "<>" : format("[%s]", replace(a, "b", "$&"))])}';
  assert.deepEqual(await templateVariables(quoted, "t"), new Set(["xs"]));
  assert.equal(await renderTemplate(quoted, { xs: ["abc", "", "b"] }, "t"), "[a$&c] <> [$&]");
  await assert.rejects(renderTemplate('${format("%d", 1)}', {}, "t"), UnsupportedError);
  await assert.rejects(renderTemplate("${missing}", {}, "t"), /unknown t variable "missing"/);
  await assert.rejects(renderTemplate("%{ if a }x%{ endif }", { a: true }, "t"), UnsupportedError);
  await assert.rejects(renderTemplate("${~ a }", { a: 1 }, "t"), UnsupportedError);
  await assert.rejects(renderTemplate("${a}", { a: [1] }, "t"), /cannot put/);
});

Deno.test("the start-up script's variables are exactly those renderStartTraining() hands it", async () => {
  const template = Deno.readTextFileSync(START_TRAINING_TEMPLATE);
  const vars = localVars("/tmp", {});
  assert.deepEqual(await templateVariables(template, "start-training"), new Set(Object.keys(vars)));
});

// ---- a rendered 2-node cluster ----

Deno.test("a 2-node cluster's start-up scripts launch each node with its rank, the node count and the master's address", async () => {
  const values = await exampleValues(CLUSTER_DIR);
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
  const nodes = await renderCluster({ ...await exampleValues(CLUSTER_DIR), cluster_size: 3 });
  const launches = nodes.map((node) => flagMap(launchArguments(fileOf(node, START_SCRIPT))));
  assert.deepEqual(launches.map((f) => f.get("node-rank")), ["0", "1", "2"]);
  assert.deepEqual(launches.map((f) => f.get("nnodes")), ["3", "3", "3"]);
  assert.deepEqual(launches.map((f) => f.get("master-addr")), [
    MASTER_ADDR,
    MASTER_ADDR,
    MASTER_ADDR,
  ]);
});

for (const cloud of CLOUDS.slice(1)) {
  Deno.test(`${cloud.cloud}: 2- and 3-node clusters launch each node with its rank, the node count, 8 GPUs and the reserved master address`, async () => {
    for (const size of [2, 3]) {
      const values = { ...await exampleValues(cloud.dir), cluster_size: size };
      const nodes = await renderCluster(values, cloud);
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
        assert.ok(setup.includes(`echo '${cloud.fstab}' >>/etc/fstab`), setup);
        assertGpuLibsBeforeBuild(setup);
        assert.equal(await bashSyntaxErrors(setup), "", `${cloud.cloud} setup-node.sh`);
        assert.deepEqual(node.files.get(JOB_ENV), {
          content: `DTRAIN_TOKEN=${TOKEN}\n`,
          permissions: "0600",
        });
        assert.equal(node.userData.split(TOKEN).length, 2, "the token appears once");
      }
    }
  });
}

Deno.test("AWS and GCP variable validations reject bad regions, machines, networks and filesystem sizes", async () => {
  const cases: [string, Record<string, Value>, RegExp][] = [
    [AWS_DIR, { region: "mars-1" }, /^region:/],
    [AWS_DIR, { subnet_id: "subnet-xyz" }, /^subnet_id:/],
    [AWS_DIR, { ssh_cidr: "0.0.0.0/0" }, /^ssh_cidr:/],
    [AWS_DIR, { ssh_cidr: "203.0.113.7" }, /^ssh_cidr:/],
    [AWS_DIR, { instance_type: "p4d.24xlarge" }, /^instance_type:/],
    [AWS_DIR, { ami_id: "ubuntu" }, /^ami_id:/],
    [AWS_DIR, { efa_interfaces: 33 }, /^efa_interfaces:/],
    [AWS_DIR, { shared_fs_size_gib: 2000 }, /^shared_fs_size_gib:/],
    [AWS_DIR, { cluster_size: 0 }, /^cluster_size:/],
    [GCP_DIR, { project_id: "X" }, /^project_id:/],
    [GCP_DIR, { zone: "europe-west4-a" }, /^zone: .*zone of region/],
    [GCP_DIR, { machine_type: "a2-highgpu-8g" }, /^machine_type:/],
    [GCP_DIR, { gpu_network_prefix: "8.8" }, /^gpu_network_prefix:/],
    [GCP_DIR, { shared_fs_size_gib: 1024 }, /^shared_fs_size_gib:/],
    [GCP_DIR, { image: "ubuntu" }, /^image:/],
    [GCP_DIR, { ssh_cidr: "0.0.0.0/0" }, /^ssh_cidr:/],
    [GCP_DIR, { train_args: ["--device=cpu"] }, /^train_args:/],
  ];
  for (const [dir, change, expected] of cases) {
    const config = await loadConfig(dir);
    const failures = await validationFailures(config, { ...await exampleValues(dir), ...change });
    const context = `${dir} ${JSON.stringify(change)}: ${failures.join("; ")}`;
    assert.equal(failures.length, 1, context);
    assert.match(failures[0], expected, context);
  }
});

Deno.test("cluster cloud-init installs dtrain, mounts the shared filesystem and starts the unit on every boot", async () => {
  const config = await loadConfig(CLUSTER_DIR);
  const values = await exampleValues(CLUSTER_DIR);
  const [node] = await renderCluster(values);
  const filesystems = await evaluateAttribute(
    config,
    "module.nodes.nebius_compute_v1_instance.node",
    "filesystems",
    {
      values,
      countIndex: 0,
      fixtures: FIXTURES,
    },
  ) as Record<string, string>[];
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
  for (const node of await renderCluster(await exampleValues(CLUSTER_DIR))) {
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
  const config = await loadConfig(SINGLE_GPU_DIR);
  const values = await exampleValues(SINGLE_GPU_DIR);
  const node = await renderNode(config, "module.vm.nebius_compute_v1_instance.node", values, 0);
  const args = launchArguments(fileOf(node, START_SCRIPT));
  const flags = flagMap(args);
  assert.equal(trainConfig(args).nprocPerNode, 1);
  assert.equal(flags.get("nnodes"), "1");
  assert.equal(flags.get("node-rank"), "0");
  assert.equal(flags.get("nproc-per-node"), "1");
  assert.equal(flags.get("master-addr"), "127.0.0.1");
  assert.equal(flags.get("snapshot"), "/mnt/shared/dtrain/snapshot.safetensors");
  assert.equal(node.files.get(JOB_ENV)?.content, `DTRAIN_TOKEN=${TOKEN}\n`);
  assertGpuLibsBeforeBuild(fileOf(node, SETUP_SCRIPT));
});

Deno.test("the rendered start-up and setup scripts pass bash -n", async () => {
  const [node] = await renderCluster(await exampleValues(CLUSTER_DIR));
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
    const [node] = await renderCluster(await exampleValues(CLUSTER_DIR));
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

// ---- the start-up script, run ----

Deno.test("start-up script: the master launches at once, exactly as its launch section reads", async () => {
  const { vars, script, run } = await runStartTraining({ node_rank: 0 }, { DTRAIN_TOKEN: TOKEN });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.denoCalls.length, 1);
  const [call] = run.denoCalls;
  assert.deepEqual(call.args, ["task", "train", ...launchArguments(script)]);
  assert.equal(call.cwd, vars.install_dir);
  assert.equal(call.tokenSet, true);
  assert.equal(flagMap(launchArguments(script)).get("device"), "cpu");
  assert.ok(Deno.statSync(vars.log_dir).isDirectory);
  assert.ok(!(run.stdout + run.stderr).includes(TOKEN), "the token was printed");
});

Deno.test("start-up script: a worker waits for the master's port, then launches and resumes", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepting = (async () => {
    for await (const connection of listener) connection.close();
  })();
  try {
    const port = (listener.addr as Deno.NetAddr).port;
    const dir = Deno.makeTempDirSync({ prefix: "dtrain-worker-" });
    const vars = localVars(dir, { node_rank: 1, master_port: port });
    Deno.mkdirSync(`${dir}/shared`, { recursive: true });
    Deno.writeTextFileSync(vars.snapshot_path, "snapshot");
    fakeCheckout(vars.install_dir);
    Deno.writeTextFileSync(`${dir}/start.sh`, await renderStartTraining(vars));
    const run = await runScript(`${dir}/start.sh`, [], { DTRAIN_TOKEN: TOKEN }, `${dir}/calls`);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, new RegExp(`master 127\\.0\\.0\\.1:${port} is up`));
    assert.match(run.stderr, /resuming from .*snapshot\.safetensors/);
    const flags = flagMap(run.denoCalls[0].args.slice(2));
    assert.equal(flags.get("node-rank"), "1");
    assert.equal(flags.get("master-port"), String(port));
  } finally {
    listener.close();
    await accepting.catch(() => {});
  }
});

Deno.test("start-up script: a worker gives up after its bounded retries when the master never listens", async () => {
  const started = performance.now();
  const { run } = await runStartTraining(
    { node_rank: 1, master_port: closedPort(), connect_attempts: 2, connect_interval_s: 1 },
    { DTRAIN_TOKEN: TOKEN },
  );
  assert.notEqual(run.code, 0);
  assert.match(run.stderr, /attempt 1 of 2/);
  assert.match(run.stderr, /gave up on master 127\.0\.0\.1:\d+ after 2 attempts/);
  assert.equal(run.denoCalls.length, 0, "launched without a master");
  assert.ok(performance.now() - started < 20_000, "the retries are not bounded");
});

Deno.test("start-up script: refuses to start without DTRAIN_TOKEN", async () => {
  const { run } = await runStartTraining({ node_rank: 0 }, {});
  assert.equal(run.code, 1);
  assert.match(run.stderr, /DTRAIN_TOKEN is not set/);
  assert.equal(run.denoCalls.length, 0);
});

// ---- SLURM and Kubernetes recipes ----

Deno.test("SLURM batch script starts one launcher per node with SLURM's node id as rank and first host as master", async () => {
  const { dir, ...run } = await runSbatch(`${INFRA_DIR}/slurm/dtrain.sbatch`, []);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.denoCalls.length, 2);
  const launches = run.denoCalls.map((call) => ({ ...call, flags: flagMap(call.args.slice(2)) }))
    .sort((a, b) => Number(a.flags.get("node-rank")) - Number(b.flags.get("node-rank")));
  for (const [rank, { args, flags, cwd, tokenSet }] of launches.entries()) {
    assert.equal(tokenSet, true);
    assert.equal(cwd, `${dir}/checkout`);
    assert.equal(flags.get("node-rank"), String(rank));
    assert.equal(flags.get("nnodes"), "2");
    assert.equal(flags.get("master-addr"), "gpu-node-01");
    assert.equal(flags.get("master-port"), "29500");
    assert.equal(flags.get("snapshot"), `${dir}/shared/snapshot.safetensors`);
    assert.equal(flags.get("log-dir"), `${dir}/shared/logs/node-${rank}`);
    assert.equal(trainConfig(args.slice(2)).nodeRank, rank);
  }
  assert.doesNotMatch(run.stdout + run.stderr, /DTRAIN_TOKEN=/);
});

Deno.test("Kubernetes manifest: Indexed Job, headless Service, Secret token and shared volume agree", () => {
  const docs = parseAllDocuments(Deno.readTextFileSync(`${INFRA_DIR}/kubernetes/dtrain-job.yaml`))
    .map((doc) => {
      assert.deepEqual(doc.errors, []);
      return doc.toJS();
    });
  const byKind = (kind: string) => {
    const found = docs.filter((doc) => doc.kind === kind);
    assert.equal(found.length, 1, kind);
    return found[0];
  };
  const service = byKind("Service");
  const job = byKind("Job");
  const claim = byKind("PersistentVolumeClaim");
  const pod = job.spec.template.spec;
  const [container] = pod.containers;

  assert.equal(service.spec.clusterIP, "None");
  assert.equal(service.spec.selector["job-name"], job.metadata.name);
  assert.equal(pod.subdomain, service.metadata.name);
  assert.equal(job.spec.completionMode, "Indexed");
  assert.equal(job.spec.parallelism, job.spec.completions);
  assert.deepEqual(claim.spec.accessModes, ["ReadWriteMany"]);

  assert.deepEqual(container.command.slice(0, 2), ["bash", "-c"]);
  const script: string = container.command[2];
  const words = shellWords(script.slice(script.indexOf("exec deno task train")));
  assert.deepEqual(words.slice(0, 4), ["exec", "deno", "task", "train"]);
  assert.equal(words.at(-1), "$@", "the container's args come after the Job's own flags");
  const ownFlags = words.slice(4, -1);
  const flags = flagMap(ownFlags);
  assert.equal(flags.get("nnodes"), String(job.spec.completions));
  assert.equal(flags.get("node-rank"), "$JOB_COMPLETION_INDEX");
  const indexed = [
    ...ownFlags.map((word) => word.replaceAll("$JOB_COMPLETION_INDEX", "1")),
    ...container.args,
  ];
  assert.equal(trainConfig(indexed).nodeRank, 1);
  assert.equal(flags.get("master-addr"), `${job.metadata.name}-0.${service.metadata.name}`);
  assert.equal(Number(flags.get("master-port")), service.spec.ports[0].port);
  assert.equal(container.ports[0].containerPort, service.spec.ports[0].targetPort);
  assert.equal(String(container.resources.limits["nvidia.com/gpu"]), flags.get("nproc-per-node"));

  const token = container.env.find((e: { name: string }) => e.name === "DTRAIN_TOKEN");
  assert.ok(token?.valueFrom?.secretKeyRef?.name, "DTRAIN_TOKEN must come from a Secret");
  const mount = container.volumeMounts.find((m: { mountPath: string }) =>
    flags.get("snapshot")!.startsWith(`${m.mountPath}/`)
  );
  assert.ok(mount, "the snapshot must be on a mounted volume");
  const volume = pod.volumes.find((v: { name: string }) => v.name === mount.name);
  assert.equal(volume.persistentVolumeClaim.claimName, claim.metadata.name);
});
