// A Terraform configuration (terraform.ts) evaluated the way `terraform plan` would for given
// variables: an attribute of a resource, through module calls (a module's variables are its call's
// arguments), with fixtures for what only the cloud knows; and the variables' values and
// validations.
import {
  asString,
  evaluate,
  EvaluationError,
  objectScope,
  parseAttribute,
  type Scope,
  type TerraformFunction,
  UnsupportedError,
  type Value,
} from "./expression.ts";
import { coreFunctions } from "./functions.ts";
import { renderTemplate } from "./template.ts";
import type { Body, Config } from "./terraform.ts";

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

/** The functions a plan calls: Terraform's core ones, and templatefile() through template.ts. */
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

/** The scope of a root configuration: the user's variable values, a count index, fixtures. */
function terraformScope(config: Config, context: Context): Scope {
  return scopeOf(
    config,
    rootInputs(config, context.values ?? {}),
    context.countIndex,
    context.fixtures ?? {},
  );
}

/** Where a configuration's variables get their values: the user's, or a module call's. */
export type Inputs = (name: string) => Promise<Value>;

/** A root's variables: the user's values over the defaults, checked once. */
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

/**
 * What an expression of `config` can read: its variables (through `inputs`), locals, `count.index`,
 * `path.module`, module outputs, and the resources' attributes the fixtures give.
 */
export function scopeOf(
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

/** An attribute's value: its expressions evaluated, through lists and objects. */
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
