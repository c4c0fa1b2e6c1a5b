// The device seam holds: outside src/tensor/device/, no file imports a device's own module (cpu.ts,
// cuda*.ts), type-only imports included, and none decides by a device's name what memory it has.
// Everything above the seam goes through src/tensor/device/mod.ts and asks `isHostMemory`.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SEAM = `${ROOT}src/tensor/device/`;

/** Every .ts file under `dir`. */
function sources(dir: string): string[] {
  return [...Deno.readDirSync(dir)].flatMap((entry) => {
    const path = `${dir}${entry.name}`;
    if (entry.isDirectory) return sources(`${path}/`);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

const aboveSeam = [...sources(`${ROOT}src/`), ...sources(`${ROOT}bench/`), `${ROOT}mod.ts`]
  .filter((file) => !file.startsWith(SEAM));

/** The relative specifiers `file` imports or re-exports from, type-only ones too. */
function specifiers(file: string): string[] {
  const text = Deno.readTextFileSync(file);
  return [...text.matchAll(/^(?:import|export)\s[^;]*?["'](\.[^"']+)["'];/gm)].map((m) => m[1]);
}

Deno.test("no file outside src/tensor/device/ imports a device's own module", () => {
  const offenders = aboveSeam.flatMap((file) =>
    specifiers(file)
      .map((specifier) => fileURLToPath(new URL(specifier, `file://${file}`)))
      .filter((target) => /^(cpu|cuda[a-z_]*|emu[a-z_]*)\.ts$/.test(target.slice(SEAM.length)))
      .filter((target) => target.startsWith(SEAM))
      .map((target) => `${file.slice(ROOT.length)} imports ${target.slice(ROOT.length)}`)
  );
  assert.ok(aboveSeam.length > 100, `only ${aboveSeam.length} files found above the seam`);
  assert.deepEqual(offenders, []);
});

Deno.test("no file outside src/tensor/device/ tests a device's name for its memory", () => {
  // The train job's `--device cpu|cuda|emu` option (config.device, src/train/devices.ts's `choice`) is the user's choice of device, not
  // a tensor's device, and is not matched.
  const nameTest =
    /(?<!config\.)(?:device|\.name)\??\.startsWith\(["'](?:cuda|emu)|(?<!config\.)(?:device|\.name) [!=]== ["'](?:cpu|cuda|emu)/;
  const offenders = aboveSeam.flatMap((file) =>
    Deno.readTextFileSync(file).split("\n")
      .map((line, i) => ({ line, at: `${file.slice(ROOT.length)}:${i + 1}` }))
      .filter(({ line }) => !/^\s*(?:\*|\/\/)/.test(line) && nameTest.test(line))
      .map(({ at, line }) => `${at}: ${line.trim()}`)
  );
  // repr.ts prints `device='cuda:0'` for anything but the cpu, as PyTorch does: a display choice.
  assert.deepEqual(offenders.filter((o) => !o.startsWith("src/tensor/repr.ts:")), []);
});
