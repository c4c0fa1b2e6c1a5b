// The Terraform under infrastructure/, checked offline on every root of CLOUDS: the HCL parses,
// every reference, module call and templatefile() call is declared and consistent, no block is
// copied between roots, and no output carries the job token unless it is sensitive. Each check is
// shown to catch what it looks for, and so is the template renderer the other tests plan with.
import assert from "node:assert/strict";
import { UnsupportedError } from "./expression.ts";
import { renderTemplate, templateVariables } from "./template.ts";
import { configTree, loadConfig, parseConfig } from "./terraform.ts";
import {
  leakingOutputs,
  moduleCallMismatches,
  templatefileMismatches,
  undeclaredReferences,
} from "./terraform_checks.ts";
import { CLOUDS, INFRA_DIR } from "./clusters.ts";

Deno.test("every .tf file parses as HCL and declares every variable, local, resource and module it references", async () => {
  for (const root of CLOUDS) {
    const config = await loadConfig(root.dir);
    assert.ok(
      config.files.size >= 4,
      `${root.dir}: expected versions, variables, main and outputs`,
    );
    for (const each of configTree(config)) {
      assert.deepEqual(await undeclaredReferences(each), [], each.dir);
      assert.deepEqual(moduleCallMismatches(each), [], each.dir);
    }
    const providers = (config.files.get("versions.tf")!.terraform as Record<string, unknown>[])[0]
      .required_providers as Record<string, { source: string }>[];
    const [name, source] = root.provider;
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
  for (const root of CLOUDS) {
    for (const config of configTree(await loadConfig(root.dir))) {
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
  for (const root of CLOUDS) {
    const config = await loadConfig(root.dir);
    for (const each of configTree(config)) {
      assert.deepEqual(await leakingOutputs(each), [], each.dir);
    }
    assert.equal(
      config.outputs.get("dtrain_token")?.sensitive,
      true,
      `${root.dir}: dtrain_token output`,
    );
    assert.ok(
      config.resources.has("random_password.token"),
      `${root.dir}: token made by Terraform`,
    );
  }
});

Deno.test("the job token is made and output in one file, common/token.tf, which every root links in", () => {
  const written: string[] = [];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(dir)) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) walk(path);
      if (!entry.isFile || !entry.name.endsWith(".tf")) continue; // links are the sharing
      const source = Deno.readTextFileSync(path);
      if (/^(resource "random_password"|output "dtrain_token")/m.test(source)) written.push(path);
    }
  };
  walk(INFRA_DIR);
  assert.deepEqual(written, [`${INFRA_DIR}/common/token.tf`]);
  for (const root of CLOUDS) {
    assert.equal(Deno.realPathSync(`${root.dir}/token.tf`), `${INFRA_DIR}/common/token.tf`);
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
