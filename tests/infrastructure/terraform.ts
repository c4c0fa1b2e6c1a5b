// A Terraform configuration directory as the infrastructure tests see it: each .tf file parsed by
// Terraform's own HCL parser (@cdktf/hcl2json), with the local modules it calls, the static
// checks the tests run on it, and the evaluation of an attribute the way `terraform plan` would
// for given variables (through module calls: a module's variables are its call's arguments).
import { parse } from "@cdktf/hcl2json";
import { join } from "node:path";
import {
  asString,
  calls,
  coreFunctions,
  evaluate,
  EvaluationError,
  objectKeys,
  objectScope,
  parseAttribute,
  references,
  type Scope,
  type TerraformFunction,
  UnsupportedError,
  type Value,
} from "./expression.ts";
import { renderTemplate, templateVariables } from "./template.ts";

/** A block body as @cdktf/hcl2json gives it. */
export type Body = Record<string, unknown>;

/** One configuration directory (a root module). */
export interface Config {
  dir: string;
  /** Every .tf file, parsed. */
  files: Map<string, Body>;
  variables: Map<string, Body>;
  locals: Map<string, unknown>;
  outputs: Map<string, Body>;
  /** Resources and data sources by address: `type.name` and `data.type.name`. */
  resources: Map<string, Body>;
  /** Local module calls by name: the call's arguments and the configuration it calls. */
  modules: Map<string, { call: Body; config: Config }>;
}

/** Arguments of a module call that are Terraform's own, not the module's variables. */
const META_ARGUMENTS = new Set([
  "source",
  "version",
  "count",
  "for_each",
  "providers",
  "depends_on",
]);

/** Parses every .tf file of a directory. */
export async function loadConfig(dir: string): Promise<Config> {
  const sources: Record<string, string> = {};
  for (const entry of Deno.readDirSync(dir)) {
    // A linked file (job.tf, versions.tf) is read through the link, as Terraform does.
    if ((entry.isFile || entry.isSymlink) && entry.name.endsWith(".tf")) {
      sources[entry.name] = Deno.readTextFileSync(join(dir, entry.name));
    }
  }
  return await parseConfig(dir, sources);
}

/** Parses the given sources as the .tf files of `dir` (which need not exist). */
export async function parseConfig(dir: string, sources: Record<string, string>): Promise<Config> {
  const config: Config = {
    dir,
    files: new Map(),
    variables: new Map(),
    locals: new Map(),
    outputs: new Map(),
    resources: new Map(),
    modules: new Map(),
  };
  for (const [name, source] of Object.entries(sources).sort()) {
    const file = await parse(name, source);
    config.files.set(name, file);
    for (const [key, bodies] of Object.entries(file.variable ?? {})) {
      declare(config.variables, `variable ${key}`, key, single(bodies));
    }
    for (const [key, bodies] of Object.entries(file.output ?? {})) {
      declare(config.outputs, `output ${key}`, key, single(bodies));
    }
    for (const block of file.locals ?? []) {
      for (const [key, value] of Object.entries(block)) {
        declare(config.locals, `local.${key}`, key, value);
      }
    }
    for (const [key, bodies] of Object.entries(file.module ?? {})) {
      const call = single(bodies);
      const source = String(call.source);
      if (!/^\.\.?\//.test(source)) throw new UnsupportedError(`module ${key}: source ${source}`);
      if (config.modules.has(key)) throw new EvaluationError(`module ${key} is declared twice`);
      config.modules.set(key, { call, config: await loadConfig(join(dir, source)) });
    }
    for (const [prefix, kinds] of [["", file.resource], ["data.", file.data]]) {
      for (const [type, named] of Object.entries(kinds ?? {})) {
        for (const [key, bodies] of Object.entries(named as Body)) {
          const address = `${prefix}${type}.${key}`;
          declare(config.resources, address, address, single(bodies));
        }
      }
    }
  }
  return config;
}

/** A configuration and every module it calls, directly or not, each once. */
export function configTree(config: Config): Config[] {
  const found = new Map<string, Config>([[config.dir, config]]);
  for (const { config: child } of config.modules.values()) {
    for (const each of configTree(child)) found.set(each.dir, each);
  }
  return [...found.values()];
}

/** Every attribute value of a configuration that is an expression, with where it is. */
export function expressions(config: Config): { where: string; source: string }[] {
  const found: { where: string; source: string }[] = [];
  const walk = (value: unknown, where: string) => {
    if (typeof value === "string") {
      if (value.includes("${")) found.push({ where, source: value });
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, value.length === 1 ? where : `${where}[${i}]`));
    } else if (value !== null && typeof value === "object") {
      for (const [key, item] of Object.entries(value)) walk(item, `${where}.${key}`);
    }
  };
  for (const [name, file] of config.files) {
    // `moved` blocks name addresses of an older layout on purpose.
    for (const [key, blocks] of Object.entries(file)) {
      if (key !== "moved") walk(blocks, `${name}: ${key}`);
    }
  }
  return found;
}

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

/**
 * A validation condition that did not evaluate to a bool: Terraform's own error (a failed call
 * outside `can()`), or a crash of the evaluator. Kept apart from failed validations, so that a
 * negative case can never pass because the evaluator broke.
 */
export class ValidationEvaluationError extends Error {
  constructor(readonly problems: string[]) {
    super(`${problems.length} validation condition(s) did not evaluate:\n${problems.join("\n")}`);
  }
}

/**
 * The error messages of every variable validation that the given values fail.
 * @param overrides replaces evaluator functions (the tests plant a broken one through it).
 * @throws ValidationEvaluationError naming every condition that did not evaluate to a bool.
 */
export async function validationFailures(
  config: Config,
  values: Record<string, Value>,
  overrides: Record<string, TerraformFunction> = {},
): Promise<string[]> {
  const scope = terraformScope(config, { values });
  const failures: string[] = [];
  const problems: string[] = [];
  for (const [name, variable] of config.variables) {
    for (const rule of (variable.validation ?? []) as Body[]) {
      const condition = String(rule.condition).replace(/^\$\{(.*)\}$/s, "$1");
      let passed: Value;
      try {
        passed = await evaluate(await parseAttribute(String(rule.condition)), scope, {
          ...functions,
          ...overrides,
        });
      } catch (error) {
        problems.push(`${name}: ${condition}: ${error instanceof Error ? error.message : error}`);
        continue;
      }
      if (typeof passed !== "boolean") {
        problems.push(`${name}: ${condition} is ${JSON.stringify(passed)}, not a bool`);
      } else if (!passed) {
        failures.push(`${name}: ${rule.error_message}`);
      }
    }
  }
  if (problems.length > 0) throw new ValidationEvaluationError(problems);
  return failures;
}

/** What a plan needs that only the cloud knows: resource attributes, by type and name. */
export type Fixtures = Record<string, Value>;

/** The variables, the count index and the cloud's answers an evaluation runs with. */
export interface Context {
  values?: Record<string, Value>;
  countIndex?: number;
  fixtures?: Fixtures;
}

/** Evaluates an attribute of a resource (`type.name`) the way a plan would. */
export async function evaluateAttribute(
  config: Config,
  address: string,
  attribute: string,
  context: Context,
): Promise<Value> {
  const fixtures = context.fixtures ?? {};
  let target = config;
  let inputs = rootInputs(config, context.values ?? {});
  let rest = address;
  for (let module; (module = /^module\.([^.]+)\.(.*)$/.exec(rest)) !== null; rest = module[2]) {
    ({ config: target, inputs } = moduleInputs(target, inputs, module[1], undefined, fixtures));
  }
  const body = target.resources.get(rest);
  if (body === undefined) throw new EvaluationError(`no resource ${rest} in ${target.dir}`);
  if (!Object.hasOwn(body, attribute)) throw new EvaluationError(`${address} has no ${attribute}`);
  return await evaluateValue(
    body[attribute],
    scopeOf(target, inputs, context.countIndex, fixtures),
  );
}

/** The value of every variable: its default, overridden by `values`, checked against its type. */
export function variableValues(
  config: Config,
  values: Record<string, Value>,
): Record<string, Value> {
  for (const name of Object.keys(values)) {
    if (!config.variables.has(name)) throw new EvaluationError(`variable ${name} is not declared`);
  }
  const result: Record<string, Value> = {};
  for (const [name, variable] of config.variables) {
    if (Object.hasOwn(values, name)) {
      result[name] = values[name];
    } else if (Object.hasOwn(variable, "default")) {
      result[name] = variable.default as Value;
    } else {
      continue; // required: an error only if something reads it
    }
    if (result[name] === null) continue; // null stands for "not set" in every type
    const type = String(variable.type).replace(/^\$\{(.*)\}$/, "$1");
    if (!VARIABLE_TYPES.includes(type)) {
      throw new UnsupportedError(`variable ${name} of type ${type}`);
    }
    if (typeOf(result[name]) !== type) {
      throw new EvaluationError(
        `variable ${name} must be a ${type}, got ${JSON.stringify(result[name])}`,
      );
    }
  }
  return result;
}

/** The variable types our configurations declare: the primitives, and a list of strings. */
export const VARIABLE_TYPES = ["string", "number", "bool", "list(string)"];

/** A value's type as a variable declares it (a list of strings only when every item is one). */
function typeOf(value: Value): string {
  if (Array.isArray(value)) {
    return value.every((item) => typeof item === "string") ? "list(string)" : "list";
  }
  return typeof value === "boolean" ? "bool" : typeof value;
}

const functions: Record<string, TerraformFunction> = {
  ...coreFunctions,
  templatefile: async ([path, vars]) => {
    const file = asString(await path());
    const values = await vars();
    if (values === null || typeof values !== "object" || Array.isArray(values)) {
      throw new EvaluationError(`templatefile(${file}): vars must be an object`);
    }
    return renderTemplate(
      Deno.readTextFileSync(file),
      values,
      file.slice(file.lastIndexOf("/") + 1),
    );
  },
};

function terraformScope(config: Config, context: Context): Scope {
  return scopeOf(
    config,
    rootInputs(config, context.values ?? {}),
    context.countIndex,
    context.fixtures ?? {},
  );
}

/** Where a configuration's variables get their values: the user's, or a module call's. */
type Inputs = (name: string) => Promise<Value>;

function rootInputs(config: Config, values: Record<string, Value>): Inputs {
  const resolved = variableValues(config, values);
  return (name) =>
    Object.hasOwn(resolved, name)
      ? Promise.resolve(resolved[name])
      : Promise.reject(new EvaluationError(`variable ${name} has no value and no default`));
}

/**
 * The configuration `module.NAME` calls, with its variables: the call's arguments evaluated in
 * the caller's scope (with `count.index` = `index` when the call has a count), else defaults.
 */
function moduleInputs(
  parent: Config,
  parentInputs: Inputs,
  name: string,
  index: number | undefined,
  fixtures: Fixtures,
): { config: Config; inputs: Inputs } {
  const module = parent.modules.get(name);
  if (module === undefined) throw new EvaluationError(`no module ${name} in ${parent.dir}`);
  const counted = Object.hasOwn(module.call, "count");
  if (counted !== (index !== undefined)) {
    throw new EvaluationError(
      `module.${name} ${counted ? "has a count: index it" : "has no count"}`,
    );
  }
  const callerScope = scopeOf(parent, parentInputs, index, fixtures);
  const values = new Map<string, Promise<Value>>();
  const inputs: Inputs = (variable) => {
    if (!values.has(variable)) {
      const declared = module.config.variables.get(variable);
      values.set(
        variable,
        declared === undefined
          ? Promise.reject(new EvaluationError(`module.${name} has no variable ${variable}`))
          : Object.hasOwn(module.call, variable)
          ? evaluateValue(module.call[variable], callerScope)
          : Object.hasOwn(declared, "default")
          ? Promise.resolve(declared.default as Value)
          : Promise.reject(new EvaluationError(`module.${name}: ${variable} is not passed`)),
      );
    }
    return values.get(variable)!;
  };
  return { config: module.config, inputs };
}

function scopeOf(
  config: Config,
  inputs: Inputs,
  countIndex: number | undefined,
  fixtureValues: Fixtures,
): Scope {
  const locals = new Map<string, Promise<Value>>();
  const fixtures = objectScope(fixtureValues, "resource (no fixture for it)");
  const scope: Scope = {
    async resolve(steps): Promise<{ value: Value; used: number }> {
      const [root, name] = steps;
      switch (root) {
        case "var":
          if (!config.variables.has(String(name))) {
            throw new EvaluationError(`variable ${String(name)} is not declared in ${config.dir}`);
          }
          return { value: await inputs(String(name)), used: 2 };
        case "local": {
          if (!config.locals.has(String(name))) {
            throw new EvaluationError(`no local.${String(name)}`);
          }
          if (!locals.has(String(name))) {
            locals.set(String(name), evaluateValue(config.locals.get(String(name)), scope));
          }
          return { value: await locals.get(String(name))!, used: 2 };
        }
        case "count":
          if (countIndex === undefined) throw new EvaluationError("count.index outside count");
          return { value: { index: countIndex }, used: 1 };
        case "path":
          return { value: { module: config.dir, root: config.dir }, used: 1 };
        case "module": {
          const counted = Object.hasOwn(config.modules.get(String(name))?.call ?? {}, "count");
          const index = counted ? steps[2] : undefined;
          if (counted && typeof index !== "number") {
            throw new EvaluationError(`module.${String(name)} has a count: index it`);
          }
          const used = counted ? 3 : 2;
          const child = moduleInputs(config, inputs, String(name), index as number, fixtureValues);
          const output = child.config.outputs.get(String(steps[used]));
          if (output === undefined) {
            throw new EvaluationError(
              `module.${String(name)} has no output ${String(steps[used])}`,
            );
          }
          const childScope = scopeOf(child.config, child.inputs, undefined, fixtureValues);
          return { value: await evaluateValue(output.value, childScope), used: used + 1 };
        }
        default:
          return fixtures.resolve(steps);
      }
    },
  };
  return scope;
}

async function evaluateValue(value: unknown, scope: Scope): Promise<Value> {
  if (typeof value === "string" && value.includes("${")) {
    return evaluate(await parseAttribute(value), scope, functions);
  }
  if (Array.isArray(value)) return Promise.all(value.map((item) => evaluateValue(item, scope)));
  if (value !== null && typeof value === "object") {
    const object: Record<string, Value> = {};
    for (const [key, item] of Object.entries(value)) object[key] = await evaluateValue(item, scope);
    return object;
  }
  return value as Value;
}

function providerPrefixes(config: Config): string[] {
  const prefixes: string[] = [];
  for (const file of config.files.values()) {
    for (const block of (file.terraform ?? []) as Body[]) {
      for (const providers of (block.required_providers ?? []) as Body[]) {
        prefixes.push(...Object.keys(providers).map((name) => `${name}_`));
      }
    }
  }
  return prefixes;
}

function single(bodies: unknown): Body {
  if (!Array.isArray(bodies) || bodies.length !== 1) {
    throw new UnsupportedError(`expected one block body, got ${JSON.stringify(bodies)}`);
  }
  return bodies[0];
}

function declare<T>(map: Map<string, T>, what: string, key: string, value: T) {
  if (map.has(key)) throw new EvaluationError(`${what} is declared twice`);
  map.set(key, value);
}
