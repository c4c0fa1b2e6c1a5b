// A Terraform configuration directory as the infrastructure tests see it: each .tf file parsed by
// Terraform's own HCL parser (@cdktf/hcl2json), with the local modules it calls and every
// expression in it. Its static checks are in terraform_checks.ts; the evaluation of an attribute
// the way `terraform plan` would, and of the variables' validations, in terraform_plan.ts.
import { parse } from "@cdktf/hcl2json";
import { join } from "node:path";
import { EvaluationError, UnsupportedError } from "./expression.ts";

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
export const META_ARGUMENTS: Set<string> = new Set([
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

/** The resource-type prefixes of the providers a configuration requires (`aws_`, `google_`). */
export function providerPrefixes(config: Config): string[] {
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

/** The one body of a block that Terraform allows once (hcl2json gives a list). */
function single(bodies: unknown): Body {
  if (!Array.isArray(bodies) || bodies.length !== 1) {
    throw new UnsupportedError(`expected one block body, got ${JSON.stringify(bodies)}`);
  }
  return bodies[0];
}

/** Records a declaration, refusing a second one of the same name. */
function declare<T>(map: Map<string, T>, what: string, key: string, value: T) {
  if (map.has(key)) throw new EvaluationError(`${what} is declared twice`);
  map.set(key, value);
}
