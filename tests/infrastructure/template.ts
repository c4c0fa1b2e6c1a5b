// Terraform's templatefile for the infrastructure tests. Our templates use only `${expr}`
// interpolation and the `$${` / `%%{` escapes, so that is all this renders; a directive
// (`%{ if }`, `%{ for }`) or a strip marker (`~`) throws instead of rendering wrongly.
import {
  evaluate,
  objectScope,
  parseExpression,
  references,
  templateString,
  UnsupportedError,
  type Value,
} from "./expression.ts";
import { coreFunctions } from "./functions.ts";

/** A piece of a template: literal text, or an interpolated expression. */
export type TemplatePart = { text: string } | { expression: string };

/** Splits a template into literal text and `${...}` expressions. */
export function parseTemplate(source: string, name: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let text = "";
  let i = 0;
  while (i < source.length) {
    if (source.startsWith("$${", i) || source.startsWith("%%{", i)) {
      text += source.slice(i + 1, i + 3);
      i += 3;
    } else if (source.startsWith("%{", i)) {
      throw new UnsupportedError(`${name}:${lineOf(source, i)}: template directive %{...}`);
    } else if (source.startsWith("${", i)) {
      const end = closingBrace(source, i + 2, name);
      const expression = source.slice(i + 2, end).trim();
      if (expression.startsWith("~") || expression.endsWith("~")) {
        throw new UnsupportedError(
          `${name}:${lineOf(source, i)}: strip marker in \${${expression}}`,
        );
      }
      if (text) parts.push({ text });
      parts.push({ expression });
      text = "";
      i = end + 1;
    } else {
      text += source[i++];
    }
  }
  if (text) parts.push({ text });
  return parts;
}

/** The names a template reads: what its `templatefile` call must pass, and no more. */
export async function templateVariables(source: string, name: string): Promise<Set<string>> {
  const names = new Set<string>();
  for (const part of parseTemplate(source, name)) {
    if (!("expression" in part)) continue;
    for (const reference of references(await parseExpression(part.expression))) {
      names.add(reference.split(/[.[]/)[0]);
    }
  }
  return names;
}

/** Renders a template as `templatefile(path, vars)` does; an unknown name throws. */
export async function renderTemplate(
  source: string,
  vars: Record<string, Value>,
  name: string,
): Promise<string> {
  const scope = objectScope(vars, `${name} variable`);
  let out = "";
  for (const part of parseTemplate(source, name)) {
    if ("text" in part) {
      out += part.text;
    } else {
      const value = await evaluate(await parseExpression(part.expression), scope, coreFunctions);
      out += templateString(value, `${name}: \${${part.expression}}`);
    }
  }
  return out;
}

/** Index of the `}` that closes an interpolation whose expression starts at `from`. */
function closingBrace(source: string, from: number, name: string): number {
  let depth = 0;
  for (let i = from; i < source.length; i++) {
    const c = source[i];
    if (c === '"') {
      for (i++; i < source.length && source[i] !== '"'; i++) if (source[i] === "\\") i++;
    } else if (c === "{") {
      depth++;
    } else if (c === "}") {
      if (depth === 0) return i;
      depth--;
    }
  }
  throw new UnsupportedError(`${name}:${lineOf(source, from)}: unclosed \${`);
}

function lineOf(source: string, index: number): number {
  return source.slice(0, index).split("\n").length;
}
