// Terraform expressions for the infrastructure tests: parsed by Terraform's own HCL parser
// (@cdktf/hcl2json, compiled to WASM) and evaluated here for the subset our configurations use,
// with the functions of functions.ts. Anything outside that subset throws UnsupportedError;
// `can()` and `try()` swallow only EvaluationError (what Terraform reports), never that nor a
// crash of the evaluator itself.
import { getExpressionAst, type TFExpressionSyntaxTree } from "@cdktf/hcl2json";

type Ast = TFExpressionSyntaxTree.ExpressionType;
type TraversalPart = TFExpressionSyntaxTree.TerraformTraversalPart;

/** A Terraform value as these tests see it. */
export type Value = string | number | boolean | null | Value[] | { [key: string]: Value };

/** A construct the evaluator does not implement: a test bug, never a configuration's error. */
export class UnsupportedError extends Error {}

/** What Terraform itself would report (unknown variable, failed regex, missing file). */
export class EvaluationError extends Error {}

/** One step of a traversal: `.name` or `[index]`. */
export type Step = string | number;

/** Resolves the start of a traversal (`var.x`, `local.y`, `count.index`, a resource). */
export interface Scope {
  /** The value the first steps name, and how many steps that took. */
  resolve(steps: Step[]): Promise<{ value: Value; used: number }>;
}

/** A function argument, evaluated on demand so that `can()` and `try()` can catch its errors. */
export type Arg = () => Promise<Value>;
/** A Terraform function. */
export type TerraformFunction = (args: Arg[]) => Promise<Value>;

/** A scope holding fixed names, e.g. the variables handed to a template. */
export function objectScope(values: Record<string, Value>, what = "name"): Scope {
  return {
    resolve([root]) {
      if (typeof root !== "string" || !Object.hasOwn(values, root)) {
        throw new EvaluationError(`unknown ${what} ${JSON.stringify(root)}`);
      }
      return Promise.resolve({ value: values[root], used: 1 });
    },
  };
}

/** Parses a Terraform expression, e.g. `var.x + 1` or `"${path.module}/a"`. */
export async function parseExpression(source: string): Promise<Ast> {
  const ast = await getExpressionAst("expression.tf", source);
  if (ast === null) throw new UnsupportedError(`empty expression ${JSON.stringify(source)}`);
  return ast;
}

/**
 * Parses an attribute value as @cdktf/hcl2json's `parse` gives it: a string with `${...}` in it
 * stands for a Terraform template, anything else is a literal.
 */
export function parseAttribute(value: string): Promise<Ast> {
  return parseExpression(`"${value}"`);
}

/** Every traversal in an expression, as dotted text (`var.x`, `local.y`, `count.index`). */
export function references(ast: Ast): string[] {
  const found: string[] = [];
  const walk = (node: Ast, bound: Set<string>) => {
    if (node.type === "scopeTraversal" && !bound.has(node.meta.fullAccessor.split(/[.[]/)[0])) {
      found.push(node.meta.fullAccessor);
    }
    // A for expression's key and value names are its own, not the scope's.
    const inner = node.type === "for"
      ? new Set([...bound, node.meta.keyVar, node.meta.valVar].filter(Boolean))
      : bound;
    for (const child of node.children ?? []) walk(child, inner);
  };
  walk(ast, new Set());
  return found;
}

/** Every call of the named function in an expression. */
export function calls(ast: Ast, name: string): TFExpressionSyntaxTree.FunctionCallExpression[] {
  const found: TFExpressionSyntaxTree.FunctionCallExpression[] = [];
  const walk = (node: Ast) => {
    if (node.type === "function" && node.meta.name === name) found.push(node);
    for (const child of node.children ?? []) walk(child);
  };
  walk(ast);
  return found;
}

/** The keys of an object constructor `{ a = 1, "b" = 2 }`, in source order. */
export function objectKeys(ast: Ast): string[] {
  if (ast.type !== "object") throw new UnsupportedError(`expected an object, got ${ast.type}`);
  return Object.keys(ast.meta.items).map(unquoteKey);
}

/** Evaluates an expression in a scope with the given functions. */
export async function evaluate(
  ast: Ast,
  scope: Scope,
  functions: Record<string, TerraformFunction>,
): Promise<Value> {
  const recurse = (node: Ast) => evaluate(node, scope, functions);
  switch (ast.type) {
    case "literalValue":
      return literal(ast.meta.type, ast.meta.value);
    case "templateWrap":
      return recurse(only(ast));
    case "" as Ast["type"]:
      // The parser gives parentheses no type: `(a && b)` is a node with one child.
      return recurse(only(ast));
    case "template": {
      let text = "";
      for (const part of ast.children) {
        text += part.type === "literalValue"
          ? unescapeString(part.meta.value)
          : templateString(await recurse(part), part.meta.value);
      }
      return text;
    }
    case "scopeTraversal":
      return resolve(scope, ast.meta.traversal.map(step), ast.meta.fullAccessor);
    case "index":
    case "relativeTraversal": {
      // `a.b[k].c` is one traversal with a computed step: resolved as one, so that the scope
      // sees every step (a module with a count is found by its index).
      const after = ast.type === "index" ? [] : ast.meta.traversal.map(step);
      const source = ast.type === "index" ? ast : only(ast);
      if (source.type === "index") {
        const [collection, key] = source.children;
        const index = await recurse(key);
        if (typeof index !== "number" && typeof index !== "string") {
          throw new EvaluationError(`${source.meta.value}: cannot index with ${index}`);
        }
        const where = `${source.meta.value}${after.map((s) => `.${s}`).join("")}`;
        if (collection.type === "scopeTraversal") {
          const steps = [...collection.meta.traversal.map(step), index, ...after];
          return resolve(scope, steps, where);
        }
        return traverse(await recurse(collection), [index, ...after], where);
      }
      return traverse(await recurse(source), after, ast.meta.value);
    }
    case "function": {
      const fn = functions[ast.meta.name];
      if (fn === undefined) {
        throw new UnsupportedError(`function ${ast.meta.name}() in ${ast.meta.value}`);
      }
      if (ast.meta.expandedFinalArgument) throw new UnsupportedError(`... in ${ast.meta.value}`);
      return fn(ast.children.map((child) => () => recurse(child)));
    }
    case "binaryOp":
      return binary(
        ast.meta.operator,
        await recurse(ast.children[0]),
        await recurse(ast.children[1]),
      );
    case "unaryOp": {
      const value = await recurse(only(ast));
      if (ast.meta.operator === "negate") return -asNumber(value);
      if (ast.meta.operator === "logicalNot") return !asBool(value);
      throw new UnsupportedError(`unary operator ${ast.meta.operator}`);
    }
    case "conditional": {
      const [condition, whenTrue, whenFalse] = ast.children;
      return asBool(await recurse(condition)) ? recurse(whenTrue) : recurse(whenFalse);
    }
    case "tuple":
      return Promise.all(ast.children.map(recurse));
    case "for":
      return forExpression(ast, scope, functions);
    case "object": {
      const object: Record<string, Value> = {};
      for (const [key, source] of Object.entries(ast.meta.items)) {
        object[unquoteKey(key)] = await recurse(await parseExpression(source));
      }
      return object;
    }
    default:
      throw new UnsupportedError(`${ast.type} expression ${ast.meta?.value}`);
  }
}

/**
 * `[for v in xs : expr if cond]` and `[for k, v in xs : ...]`: a list, from a list or an object.
 * The object form (`{for ...}`) is not used by our configurations.
 */
async function forExpression(
  ast: TFExpressionSyntaxTree.ForExpression,
  scope: Scope,
  functions: Record<string, TerraformFunction>,
): Promise<Value> {
  const { keyVar, valVar, openRangeValue, value } = ast.meta;
  if (openRangeValue !== "[") throw new UnsupportedError(`object for expression ${value}`);
  const collection = await evaluate(
    await parseExpression(ast.meta.collectionExpression),
    scope,
    functions,
  );
  let entries: [Value, Value][];
  if (Array.isArray(collection)) {
    entries = collection.map((item, index) => [index, item]);
  } else if (collection !== null && typeof collection === "object") {
    entries = Object.entries(collection);
  } else {
    throw new EvaluationError(`${value}: cannot iterate over ${JSON.stringify(collection)}`);
  }
  const element = await parseExpression(ast.meta.valueExpression);
  const condition = ast.meta.conditionalExpression
    ? await parseExpression(ast.meta.conditionalExpression)
    : null;
  const result: Value[] = [];
  for (const [key, item] of entries) {
    const names: Record<string, Value> = { [valVar]: item, ...(keyVar ? { [keyVar]: key } : {}) };
    const inner: Scope = {
      resolve(steps) {
        const [root] = steps;
        if (typeof root === "string" && Object.hasOwn(names, root)) {
          return Promise.resolve({ value: names[root], used: 1 });
        }
        return scope.resolve(steps);
      },
    };
    if (condition !== null && !asBool(await evaluate(condition, inner, functions))) continue;
    result.push(await evaluate(element, inner, functions));
  }
  return result;
}

/** How Terraform writes a value into a string template. */
export function templateString(value: Value, where: string): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  throw new EvaluationError(`${where}: cannot put ${JSON.stringify(value)} into a string`);
}

/** A value as a string, as Terraform converts one (numbers and bools too). */
export function asString(value: Value): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  throw new EvaluationError(`expected a string, got ${JSON.stringify(value)}`);
}

/** A value that must be a number. */
export function asNumber(value: Value): number {
  if (typeof value === "number") return value;
  throw new EvaluationError(`expected a number, got ${JSON.stringify(value)}`);
}

/** A value that must be a bool. */
export function asBool(value: Value): boolean {
  if (typeof value === "boolean") return value;
  throw new EvaluationError(`expected a bool, got ${JSON.stringify(value)}`);
}

/** A value that must be a list. */
export function asList(value: Value): Value[] {
  if (Array.isArray(value)) return value;
  throw new EvaluationError(`expected a list, got ${JSON.stringify(value)}`);
}

function only(ast: Ast): Ast {
  if (ast.children.length !== 1) {
    throw new UnsupportedError(`${ast.type} with ${ast.children.length} parts: ${ast.meta.value}`);
  }
  return ast.children[0];
}

function literal(type: string, raw: string): Value {
  if (type === "number") return Number(raw);
  if (type === "bool") return raw === "true";
  if (type === "string") return unescapeString(raw);
  if (type === "dynamic" && raw === "null") return null;
  throw new UnsupportedError(`literal ${raw} of type ${type}`);
}

const ESCAPES: Record<string, string> = { n: "\n", r: "\r", t: "\t", '"': '"', "\\": "\\" };

/** Terraform's quoted-string escapes, from the raw source text the parser hands back. */
function unescapeString(raw: string): string {
  return raw.replace(/\\(.)|\$\$\{|%%\{/g, (all, escaped?: string) => {
    if (all === "$${") return "${";
    if (all === "%%{") return "%{";
    const replacement = ESCAPES[escaped!];
    if (replacement === undefined) throw new UnsupportedError(`string escape ${all}`);
    return replacement;
  });
}

function unquoteKey(key: string): string {
  if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)) return key;
  if (/^"[^"\\$%]*"$/.test(key)) return key.slice(1, -1);
  throw new UnsupportedError(`object key ${key}`);
}

function step(part: TraversalPart): Step {
  if (part.type === "nameTraversal") return part.segment;
  if (/^[0-9]+$/.test(part.segment)) return Number(part.segment);
  if (/^"[^"\\]*"$/.test(part.segment)) return part.segment.slice(1, -1);
  throw new UnsupportedError(`index [${part.segment}]`);
}

/** Resolves the start of a traversal in the scope, then takes the steps the scope left. */
async function resolve(scope: Scope, steps: Step[], where: string): Promise<Value> {
  const { value, used } = await scope.resolve(steps);
  return traverse(value, steps.slice(used), where);
}

function traverse(value: Value, steps: Step[], where: string): Value {
  for (const key of steps) {
    if (Array.isArray(value) && typeof key === "number") {
      if (key >= value.length) throw new EvaluationError(`${where}: index ${key} out of range`);
      value = value[key];
    } else if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      if (!Object.hasOwn(value, String(key))) {
        throw new EvaluationError(`${where}: no attribute ${JSON.stringify(key)}`);
      }
      value = value[String(key)];
    } else {
      throw new EvaluationError(
        `${where}: cannot take ${JSON.stringify(key)} of ${JSON.stringify(value)}`,
      );
    }
  }
  return value;
}

function binary(operator: string, left: Value, right: Value): Value {
  switch (operator) {
    case "add":
      return asNumber(left) + asNumber(right);
    case "subtract":
      return asNumber(left) - asNumber(right);
    case "multiply":
      return asNumber(left) * asNumber(right);
    case "divide":
    case "modulo": {
      const [a, b] = [asNumber(left), asNumber(right)];
      if (b === 0) throw new EvaluationError(`${operator} of ${a} by zero`);
      return operator === "divide" ? a / b : a % b;
    }
    case "equal":
      return left === right;
    case "notEqual":
      return left !== right;
    case "greaterThan":
      return asNumber(left) > asNumber(right);
    case "greaterThanOrEqual":
      return asNumber(left) >= asNumber(right);
    case "lessThan":
      return asNumber(left) < asNumber(right);
    case "lessThanOrEqual":
      return asNumber(left) <= asNumber(right);
    case "logicalAnd":
      return asBool(left) && asBool(right);
    case "logicalOr":
      return asBool(left) || asBool(right);
    default:
      throw new UnsupportedError(`binary operator ${operator}`);
  }
}
