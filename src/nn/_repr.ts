/**
 * The printed form of modules, PyTorch's `nn.Module.__repr__` text exactly, so a model prints as
 * it would in Python: `Sequential(\n  (0): Linear(in_features=784, out_features=512, bias=True)\n)`.
 * @module
 */

/** A module as the printer sees it: its name, its `extraRepr()` and its named children. */
export interface Printable {
  extraRepr(): string;
  namedChildren(): Iterable<[string, Printable]>;
  toString(): string;
  constructor: { name: string };
}

/** Indents every line but the first by `spaces` (PyTorch's `_addindent`). */
export function addIndent(text: string, spaces: number): string {
  const lines = text.split("\n");
  if (lines.length === 1) return text;
  const pad = " ".repeat(spaces);
  return [lines[0], ...lines.slice(1).map((l) => pad + l)].join("\n");
}

/** `Name(extra)` or `Name(\n  extra\n  (child): ...\n)`, as `nn.Module.__repr__`. */
export function moduleRepr(module: Printable, children?: string[]): string {
  const extra = module.extraRepr();
  const extraLines = extra ? extra.split("\n") : [];
  const childLines = children ??
    [...module.namedChildren()].map(([name, child]) => `(${name}): ${addIndent(String(child), 2)}`);
  const lines = [...extraLines, ...childLines];
  let text = `${module.constructor.name}(`;
  if (extraLines.length === 1 && childLines.length === 0) text += extraLines[0];
  else if (lines.length) text += `\n  ${lines.join("\n  ")}\n`;
  return `${text})`;
}

/**
 * The children of a list, runs of equal consecutive ones folded into `(0-11): 12 x Block(...)`,
 * as `nn.ModuleList.__repr__` does.
 */
export function foldedChildren(children: Printable[]): string[] {
  const reprs = children.map(String);
  const lines: string[] = [];
  for (let start = 0; start < reprs.length;) {
    let end = start;
    while (end + 1 < reprs.length && reprs[end + 1] === reprs[start]) end++;
    const label = start === end
      ? `(${start}): ${reprs[start]}`
      : `(${start}-${end}): ${end - start + 1} x ${reprs[start]}`;
    lines.push(addIndent(label, 2));
    start = end + 1;
  }
  return lines;
}

/** A number as Python's `repr(float)` writes it: `1e-05`, `0.5`, `1.0`. */
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  const [mantissa, exp] = x.toExponential().split("e");
  const e = Number(exp);
  if (e < -4 || e >= 16) {
    return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  const text = String(x);
  return text.includes(".") ? text : `${text}.0`;
}

/** A shape as Python prints a tuple: `(64,)`, `(3, 4)`. */
export function pyTuple(values: readonly number[]): string {
  return values.length === 1 ? `(${values[0]},)` : `(${values.join(", ")})`;
}

/** `True` or `False`. */
export function pyBool(value: boolean): string {
  return value ? "True" : "False";
}
