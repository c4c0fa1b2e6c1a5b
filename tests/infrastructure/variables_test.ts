// The Terraform roots' variables, checked offline on every root of CLOUDS: each is described,
// typed and validated; the example tfvars pass every validation; and each cloud's validations
// reject the bad values they are for, naming the variable. A validation that cannot be evaluated
// is an error of the check, never a rejected value.
import assert from "node:assert/strict";
import type { Value } from "./expression.ts";
import { loadConfig, parseConfig } from "./terraform.ts";
import {
  ValidationEvaluationError,
  validationFailures,
  VARIABLE_TYPES,
  variableValues,
} from "./terraform_plan.ts";
import { cloud, CLOUDS, exampleValues } from "./clusters.ts";

const NEBIUS = cloud("Nebius").dir;
const SINGLE_GPU = cloud("Nebius single GPU").dir;
const AWS = cloud("AWS").dir;
const GCP = cloud("GCP").dir;

Deno.test("every variable has a description, a primitive type or a list of strings, and at least one validation", async () => {
  for (const { dir } of CLOUDS) {
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
  for (const { dir } of CLOUDS) {
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
  const config = await loadConfig(NEBIUS);
  const good = await exampleValues(NEBIUS);
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
  const config = await loadConfig(NEBIUS);
  const bad = { ...await exampleValues(NEBIUS), node_preset: "big" };
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
  const config = await loadConfig(SINGLE_GPU);
  const good = await exampleValues(SINGLE_GPU);
  const failures = await validationFailures(config, { ...good, preset: "8gpu-128vcpu-1600gb" });
  assert.equal(failures.length, 1);
  assert.match(failures[0], /^preset:/);
});

Deno.test("AWS and GCP variable validations reject bad regions, machines, networks and filesystem sizes", async () => {
  const cases: [string, Record<string, Value>, RegExp][] = [
    [AWS, { region: "mars-1" }, /^region:/],
    [AWS, { subnet_id: "subnet-xyz" }, /^subnet_id:/],
    [AWS, { ssh_cidr: "0.0.0.0/0" }, /^ssh_cidr:/],
    [AWS, { ssh_cidr: "203.0.113.7" }, /^ssh_cidr:/],
    [AWS, { instance_type: "p4d.24xlarge" }, /^instance_type:/],
    [AWS, { ami_id: "ubuntu" }, /^ami_id:/],
    [AWS, { efa_interfaces: 33 }, /^efa_interfaces:/],
    [AWS, { shared_fs_size_gib: 2000 }, /^shared_fs_size_gib:/],
    [AWS, { cluster_size: 0 }, /^cluster_size:/],
    [GCP, { project_id: "X" }, /^project_id:/],
    [GCP, { zone: "europe-west4-a" }, /^zone: .*zone of region/],
    [GCP, { machine_type: "a2-highgpu-8g" }, /^machine_type:/],
    [GCP, { gpu_network_prefix: "8.8" }, /^gpu_network_prefix:/],
    [GCP, { shared_fs_size_gib: 1024 }, /^shared_fs_size_gib:/],
    [GCP, { image: "ubuntu" }, /^image:/],
    [GCP, { ssh_cidr: "0.0.0.0/0" }, /^ssh_cidr:/],
    [GCP, { train_args: ["--device=cpu"] }, /^train_args:/],
  ];
  for (const [dir, change, expected] of cases) {
    const config = await loadConfig(dir);
    const failures = await validationFailures(config, { ...await exampleValues(dir), ...change });
    const context = `${dir} ${JSON.stringify(change)}: ${failures.join("; ")}`;
    assert.equal(failures.length, 1, context);
    assert.match(failures[0], expected, context);
  }
});
