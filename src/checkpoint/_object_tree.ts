/**
 * Turning a nested checkpoint object into named tensors plus a JSON structure, and back, for
 * `saveObject` / `loadObject` (object.ts).
 *
 * [Note: object checkpoints]
 * The structure is JSON, `{"version": 1, "value": V, "tensors": [[P, N], ...], "numbers": [[P, S],
 * ...]}`: V is the object with `null` wherever a tensor or a number JSON cannot write stands; each
 * path P (an array of keys: strings into objects, numbers into arrays) names such a place, with
 * the tensor's name N in the file or the number's spelling S ("NaN", "Infinity", "-Infinity",
 * "-0"). A tensor's name is its path joined with ".", as PyTorch users expect
 * (`model.transformer.wte.weight`, `optimizer.state.0.exp_avg`); since the real keys are in P, a
 * key holding "." needs no escape. Two different tensors whose paths join to the same name are
 * refused. A tensor met at several paths (tied weights) is stored once, under its first path's
 * name, and loaded as one tensor at all of them.
 * @module
 */

import { Tensor } from "../tensor/tensor.ts";

/** A place in the object: keys of objects and indices of arrays, from the top. */
export type ObjectPath = (string | number)[];

/** What the structure holds, as written to `__metadata__`. */
export interface Structure {
  /** The format's version (1). */
  version: 1;
  /** The object, with null where a tensor or a special number stands. */
  value: Record<string, unknown>;
  /** Where each tensor stands, and its name in the file. */
  tensors: [ObjectPath, string][];
  /** Where each number JSON cannot write stands, and its spelling. */
  numbers: [ObjectPath, string][];
}

const SPECIAL_NUMBERS: ReadonlyMap<string, number> = new Map([
  ["NaN", NaN],
  ["Infinity", Infinity],
  ["-Infinity", -Infinity],
  ["-0", -0],
]);

const SUPPORTED = "checkpoint objects hold tensors, numbers, strings, booleans, null, arrays " +
  "and plain objects";

/** `path` as an accessor expression: `optimizer.state["0"].exp_avg`, `config.betas[1]`. */
export function describePath(path: ObjectPath): string {
  if (path.length === 0) return "the top level";
  return path.map((key, i) => {
    if (typeof key === "number") return `[${key}]`;
    if (/^[A-Za-z_$][\w$]*$/.test(key)) return i === 0 ? key : `.${key}`;
    return `[${JSON.stringify(key)}]`;
  }).join("");
}

/** What `value` is, for an error that refuses it. */
function kindOf(value: unknown): string {
  if (value === undefined) return "undefined";
  if (typeof value === "bigint") return `a BigInt (${value}n)`;
  if (typeof value === "function") return "a function";
  if (typeof value === "symbol") return "a symbol";
  const name: string | undefined = (value as object).constructor?.name;
  if (!name) return "an object of no known class";
  const kind = `${/^[AEIOU]/.test(name) ? "an" : "a"} ${name}`;
  return ArrayBuffer.isView(value) ? `${kind} (store it as a tensor)` : kind;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Splits `obj` into its tensors, by name in the file, and its structure.
 *
 * @param obj The checkpoint object (a plain object).
 * @param refuse Throws the error for a value that cannot be stored.
 * @returns The distinct tensors by name, and the structure.
 */
export function flattenObject(
  obj: unknown,
  refuse: (problem: string) => never,
): { tensors: Map<string, Tensor>; structure: Structure } {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj) || !isPlainObject(obj)) {
    refuse(`the top level must be a plain object, got ${obj === null ? "null" : kindOf(obj)}`);
  }
  const tensors = new Map<string, Tensor>();
  const firstPath = new Map<string, ObjectPath>();
  const nameOf = new Map<Tensor, string>();
  const structure: Structure = { version: 1, value: {}, tensors: [], numbers: [] };
  const ancestors: object[] = [];

  const tensorAt = (t: Tensor, path: ObjectPath): null => {
    let name = nameOf.get(t);
    if (name === undefined) {
      name = path.join(".");
      const where = describePath(path);
      if (name === "" || name === "__metadata__") {
        refuse(`the tensor at ${where} would be named ${JSON.stringify(name)}, which is reserved`);
      }
      const other = firstPath.get(name);
      if (other) {
        refuse(
          `the tensors at ${describePath(other)} and ${where} would both be named ` +
            `${JSON.stringify(name)} (rename a key)`,
        );
      }
      if (t.disposed) refuse(`the tensor at ${where} was disposed`);
      tensors.set(name, t);
      firstPath.set(name, path);
      nameOf.set(t, name);
    }
    structure.tensors.push([path, name]);
    return null;
  };

  const walk = (value: unknown, path: ObjectPath): unknown => {
    if (value === null || typeof value === "string" || typeof value === "boolean") return value;
    if (typeof value === "number") {
      if (Number.isFinite(value) && !Object.is(value, -0)) return value;
      structure.numbers.push([path, Object.is(value, -0) ? "-0" : String(value)]);
      return null;
    }
    if (value instanceof Tensor) return tensorAt(value, path);
    const where = describePath(path);
    if (typeof value !== "object") refuse(`${where} is ${kindOf(value)}; ${SUPPORTED}`);
    const at = ancestors.indexOf(value);
    if (at >= 0) {
      refuse(`${where} refers back to ${describePath(path.slice(0, at))} (a cycle)`);
    }
    const isArray = Array.isArray(value);
    if (!isArray && !isPlainObject(value)) refuse(`${where} is ${kindOf(value)}; ${SUPPORTED}`);
    if (Object.getOwnPropertySymbols(value).length > 0) refuse(`${where} has symbol keys`);
    ancestors.push(value);
    try {
      if (isArray) {
        return Array.from({ length: value.length }, (_, i) => {
          if (!Object.hasOwn(value, i)) refuse(`${describePath([...path, i])} is an empty slot`);
          return walk(value[i], [...path, i]);
        });
      }
      const out: Record<string, unknown> = {};
      for (const [key, v] of Object.entries(value)) define(out, key, walk(v, [...path, key]));
      return out;
    } finally {
      ancestors.pop();
    }
  };

  structure.value = walk(obj, []) as Record<string, unknown>;
  return { tensors, structure };
}

/** Sets an own property, even one named `__proto__`. */
function define(target: object, key: string | number, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

/**
 * Rebuilds the object from a structure read from a file and the file's tensors, which it takes
 * over. Every tensor must be placed at least once, and every place must hold null.
 *
 * @param text The structure's JSON.
 * @param tensors The file's tensors by name.
 * @param fail Throws the error for a structure that does not fit.
 * @returns The object.
 */
export function unflattenObject(
  text: string,
  tensors: Record<string, Tensor>,
  fail: (problem: string) => never,
): Record<string, unknown> {
  let parsed: Partial<Structure> | null;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return fail(`the object structure is not valid JSON (${(error as Error).message})`);
  }
  const isPath = (p: unknown): p is ObjectPath =>
    Array.isArray(p) && p.length > 0 &&
    p.every((k) => typeof k === "string" || (Number.isInteger(k) && k >= 0));
  const isList = (list: unknown): list is [ObjectPath, string][] =>
    Array.isArray(list) &&
    list.every((e) =>
      Array.isArray(e) && e.length === 2 && isPath(e[0]) && typeof e[1] === "string"
    );
  const value = parsed?.value;
  if (
    parsed?.version !== 1 || value === null || typeof value !== "object" || Array.isArray(value)
  ) {
    return fail("the object structure is not version 1 with an object value");
  }
  const { tensors: tensorPlaces, numbers: numberPlaces } = parsed;
  if (!isList(tensorPlaces) || !isList(numberPlaces)) {
    return fail(`the object structure's "tensors" and "numbers" must be lists of [path, string]`);
  }
  const placed = new Set<string>();
  const place = (path: ObjectPath, item: unknown): void => {
    let container: unknown = value;
    for (const [i, key] of path.entries()) {
      const ok = typeof key === "number"
        ? Array.isArray(container) && key < container.length
        : container !== null && typeof container === "object" && !Array.isArray(container) &&
          Object.hasOwn(container, key);
      if (!ok) fail(`the object structure has no place ${describePath(path.slice(0, i + 1))}`);
      if (i === path.length - 1) {
        if ((container as Record<string, unknown>)[key] !== null) {
          fail(`the object structure places two values at ${describePath(path)}`);
        }
        define(container as object, key, item);
      } else {
        container = (container as Record<string, unknown>)[key];
      }
    }
  };
  for (const [path, spelling] of numberPlaces) {
    if (!SPECIAL_NUMBERS.has(spelling)) {
      fail(`the number at ${describePath(path)} is ${JSON.stringify(spelling)}, not a special one`);
    }
    place(path, SPECIAL_NUMBERS.get(spelling));
  }
  for (const [path, name] of tensorPlaces) {
    if (!Object.hasOwn(tensors, name)) {
      fail(
        `the object places tensor ${JSON.stringify(name)} at ${describePath(path)}, ` +
          "but the file has no such tensor",
      );
    }
    place(path, tensors[name]);
    placed.add(name);
  }
  const stray = Object.keys(tensors).filter((name) => !placed.has(name));
  if (stray.length > 0) {
    fail(`tensors ${stray.map((n) => JSON.stringify(n)).join(", ")} have no place in the object`);
  }
  return value;
}
