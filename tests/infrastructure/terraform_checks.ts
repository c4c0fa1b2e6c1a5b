// The static checks of a Terraform configuration (terraform.ts): every reference declared, every
// module call matching the module, every templatefile() call matching its template, and no output
// carrying a secret unless it is sensitive. Each returns what it found wrong, one line each.
import {
  asString,
  calls,
  evaluate,
  EvaluationError,
  objectKeys,
  parseAttribute,
  references,
} from "./expression.ts";
import { coreFunctions } from "./functions.ts";
import { templateVariables } from "./template.ts";
import { type Config, expressions, META_ARGUMENTS, providerPrefixes } from "./terraform.ts";
import { type Inputs, scopeOf } from "./terraform_plan.ts";

/** `var.x`, `local.x`, resources and data sources that are referenced but never declared. */
export async function undeclaredReferences(config: Config): Promise<string[]> {
  const providers = providerPrefixes(config);
  const problems: string[] = [];
  for (const { where, source } of expressions(config)) {
    for (const reference of references(await parseAttribute(source))) {
      const [root, name, third] = reference.split(/[.[]/);
      const missing = (root === "var" && !config.variables.has(name)) ||
        (root === "local" && !config.locals.has(name)) ||
        (root === "data" && !config.resources.has(`data.${name}.${third}`)) ||
        (root === "module" && !config.modules.has(name)) ||
        (providers.some((prefix) => root.startsWith(prefix)) &&
          !config.resources.has(`${root}.${name}`));
      if (missing) problems.push(`${where} refers to ${reference}, which is not declared`);
    }
  }
  return problems;
}

/**
 * Each module call against the module: every argument must be one of its variables, and every
 * variable without a default must be passed.
 */
export function moduleCallMismatches(config: Config): string[] {
  const problems: string[] = [];
  for (const [name, { call, config: child }] of config.modules) {
    for (const argument of Object.keys(call)) {
      if (!META_ARGUMENTS.has(argument) && !child.variables.has(argument)) {
        problems.push(`module ${name} passes ${argument}, which ${child.dir} does not declare`);
      }
    }
    for (const [variable, body] of child.variables) {
      if (!Object.hasOwn(body, "default") && !Object.hasOwn(call, variable)) {
        problems.push(`module ${name} does not pass ${variable}, which has no default`);
      }
    }
  }
  return problems;
}

/**
 * Each templatefile() call against its template: every name the template reads must be passed,
 * and every name passed must be read.
 */
export async function templatefileMismatches(config: Config): Promise<string[]> {
  const problems: string[] = [];
  // Only the template's path is evaluated: it may read path.module, never a variable.
  const noVariables: Inputs = (name) =>
    Promise.reject(new EvaluationError(`a templatefile() path reads var.${name}`));
  const scope = scopeOf(config, noVariables, undefined, {});
  for (const { where, source } of expressions(config)) {
    for (const call of calls(await parseAttribute(source), "templatefile")) {
      const [pathArg, varsArg] = call.children;
      const path = asString(await evaluate(pathArg, scope, coreFunctions));
      const template = Deno.readTextFileSync(path);
      const used = await templateVariables(template, path);
      const passed = new Set(objectKeys(varsArg));
      const name = path.slice(path.lastIndexOf("/") + 1);
      for (const key of used) {
        if (!passed.has(key)) problems.push(`${where}: ${name} reads ${key}, which is not passed`);
      }
      for (const key of passed) {
        if (!used.has(key)) {
          problems.push(`${where}: ${key} is passed to ${name}, which never reads it`);
        }
      }
    }
  }
  return problems;
}

/**
 * Outputs that are not marked sensitive but carry a secret: a random_password, a sensitive
 * variable, or an instance's user data (which holds the job token), directly or through locals.
 */
export async function leakingOutputs(config: Config): Promise<string[]> {
  const secret = (reference: string) => {
    const [root, name] = reference.split(/[.[]/);
    const output = root === "module"
      ? /^module\.[^.[]+(?:\[[^\]]*\])?\.([^.[]+)/.exec(reference)?.[1]
      : undefined;
    return root === "random_password" || reference.endsWith(".cloud_init_user_data") ||
      (root === "var" && config.variables.get(name)?.sensitive === true) ||
      (output !== undefined &&
        config.modules.get(name)?.config.outputs.get(output)?.sensitive === true);
  };
  const problems: string[] = [];
  for (const [name, output] of config.outputs) {
    if (output.sensitive === true) continue;
    const seen = new Set<string>();
    const pending = typeof output.value === "string" ? [output.value] : [];
    while (pending.length > 0) {
      const source = pending.pop()!;
      if (!source.includes("${")) continue;
      for (const reference of references(await parseAttribute(source))) {
        if (secret(reference)) {
          problems.push(`output ${name} is not sensitive but carries ${reference}`);
        }
        const [root, local] = reference.split(/[.[]/);
        if (root === "local" && !seen.has(local)) {
          seen.add(local);
          const value = config.locals.get(local);
          if (typeof value === "string") pending.push(value);
        }
      }
    }
  }
  return problems;
}
