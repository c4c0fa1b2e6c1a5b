/**
 * Builds a native library from the C sources shipped with the package, for an import that has no
 * `build/` folder beside it (from JSR or any URL): once per package version and source hash, into
 * a cache folder, under a file lock. Run as a script, it builds and prints where the library is.
 *
 * [Note: self-building libraries]
 * The loader's search is synchronous (a tensor op opens libdtrain on first use), but reading the
 * sources of a remote package needs `fetch`. So {@linkcode buildLibrary} runs this file as a child
 * `deno run` and waits for it: the child reads `csrc/sources.json` and the sources it lists from
 * wherever this file was loaded from (a `file:` checkout, `https://jsr.io/...`), hashes them with
 * the compiler command, and looks for `<DTRAIN_CACHE>/<version>-<hash>/<library>`, which it uses
 * only when [Note: a private build cache] (build_cache.ts) trusts it. Otherwise the child takes an
 * exclusive lock on that folder's `.lock` file, looks again (the ranks of a job start together;
 * the first builds, the others wait and find it), compiles into a temporary file, renames it into
 * place and then writes its record, so no process ever opens a half-written library. A new
 * version or any changed source gets a new folder; a library is rebuilt in place only when the
 * one there is not trusted.
 * @module
 */

import { createHash } from "node:crypto";
import { join } from "node:path";
import { cacheRoot, commitLibrary, privateFolder, untrustedLibrary } from "./build_cache.ts";

/** How one library is compiled, and the Debian packages that compiling it needs. */
interface Recipe {
  /** The folders under `csrc/` (keys of `csrc/sources.json`) whose sources make the library. */
  dirs: string[];
  /** Headers from other folders that its sources include, relative to `csrc/`. */
  headers?: string[];
  /** The environment variable naming the compiler, as make's, and its default. */
  compilerEnv: "CC" | "CXX";
  compiler: string;
  flags: string[];
  libs: string[];
  packages: string[];
}

/** The same commands as the Makefile's. */
const RECIPES: Record<string, Recipe> = {
  "libdtrain.so": {
    dirs: ["core"],
    compilerEnv: "CC",
    compiler: "cc",
    flags: ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-std=c11", "-fPIC"],
    libs: ["-lopenblas", "-lm"],
    packages: ["build-essential", "libopenblas-dev"],
  },
  "libdtrain_gloo.so": {
    // The shared-memory transport (csrc/shm) lives in the Gloo shim's library, as in the Makefile.
    dirs: ["gloo", "shm"],
    // The 2-byte float reductions (gloo/reduce.cc) round as libdtrain's casts do.
    headers: ["core/half_math.h"],
    compilerEnv: "CXX",
    compiler: "c++",
    flags: ["-O2", "-std=c++17", "-fPIC"],
    libs: ["-lgloo", "-lpthread", "-lrt"],
    packages: ["build-essential", "libgloo-dev"],
  },
};

/** A library could not be built; the message says why and what to install. */
export class BuildError extends Error {
  /** @param message What failed and what to do. */
  constructor(message: string) {
    super(message);
    this.name = "BuildError";
  }
}

/** Whether {@linkcode buildLibrary} knows how to build `fileName`. */
export function canBuild(fileName: string): boolean {
  return Object.hasOwn(RECIPES, fileName);
}

/**
 * Builds `fileName` from the package's sources unless the cache has it (see
 * [Note: self-building libraries]); blocks until it is there.
 *
 * @param fileName `libdtrain.so` or `libdtrain_gloo.so`.
 * @returns The library's path in the cache.
 * @throws BuildError naming what is missing, with the `apt-get install` command that adds it.
 */
export function buildLibrary(fileName: string): string {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-config", "--no-lock", import.meta.url, fileName],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit", // the one "building" line, and Deno's own download lines
  }).outputSync();
  const last = new TextDecoder().decode(child.stdout).trim().split("\n").at(-1) ?? "";
  let reply: { path?: string; error?: string } = {};
  try {
    reply = JSON.parse(last);
  } catch {
    // Reported below with the exit code.
  }
  if (reply.path) return reply.path;
  throw new BuildError(
    reply.error ?? `building ${fileName}: the build process exited with code ${child.code}`,
  );
}

/** The child's work: find the library in the cache or build it there. */
async function ensureBuilt(fileName: string): Promise<string> {
  const recipe = RECIPES[fileName];
  if (!recipe) {
    throw new BuildError(`no recipe for ${fileName} (known: ${Object.keys(RECIPES).join(", ")})`);
  }
  const base = new URL("../", import.meta.url);
  const lists = JSON.parse(await fetchText(new URL("csrc/sources.json", base)));
  // Paths relative to csrc/, so that includes across folders ("../gloo/x.h") resolve.
  const names: string[] = [
    ...recipe.dirs.flatMap((d) => ((lists[d] ?? []) as string[]).map((n) => `${d}/${n}`)),
    ...(recipe.headers ?? []),
  ];
  const contents = await Promise.all(
    names.map((name) => fetchText(new URL(`csrc/${name}`, base))),
  );
  const version = JSON.parse(await fetchText(new URL("deno.json", base))).version ?? "0";
  const compiler = Deno.env.get(recipe.compilerEnv) || recipe.compiler;
  const hash = createHash("sha256").update([compiler, ...recipe.flags, ...recipe.libs].join(" "));
  names.forEach((name, i) => hash.update(`\0${name}\0${contents[i]}`));
  // Both folders are checked on every use, not only when created (see [Note: a private build
  // cache] in build_cache.ts).
  const root = cacheRoot();
  privateFolder(root, "build cache");
  const dir = join(root, `${version}-${hash.digest("hex").slice(0, 16)}`);
  privateFolder(dir, "build cache entry");
  const target = join(dir, fileName);
  if (untrustedLibrary(target) === null) return target;

  using lock = await Deno.open(join(dir, ".lock"), { create: true, write: true });
  await lock.lock(true);
  const unused = untrustedLibrary(target);
  if (unused === null) return target;
  console.error(
    unused === "missing"
      ? `dtrain: building ${fileName} into ${dir} (once for this version)`
      : `dtrain: building ${fileName} into ${dir} again, not using the one there: ${unused}`,
  );
  const srcDir = join(dir, "src");
  for (const d of new Set(names.map((n) => n.split("/")[0]))) {
    await Deno.mkdir(join(srcDir, d), { recursive: true });
  }
  await Promise.all(names.map((name, i) => Deno.writeTextFile(join(srcDir, name), contents[i])));
  // One compiler per source file at a time, as `make -j` would, then one link.
  const objDir = await Deno.makeTempDir({ dir, prefix: "obj-" });
  const sources = names.filter((n) => /\.(c|cc)$/.test(n));
  const objects = sources.map((n) => join(objDir, `${n.replace("/", "_")}.o`));
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < sources.length; i = next++) {
      await compile(fileName, recipe, compiler, [
        ...recipe.flags,
        "-c",
        "-o",
        objects[i],
        join(srcDir, sources[i]),
      ]);
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(navigator.hardwareConcurrency, sources.length) }, worker),
  );
  const temporary = `${target}.${Deno.pid}.tmp`;
  await compile(fileName, recipe, compiler, [
    ...recipe.flags,
    "-shared",
    "-o",
    temporary,
    ...objects,
    ...recipe.libs,
  ]);
  await Deno.remove(objDir, { recursive: true });
  await commitLibrary(temporary, target);
  return target;
}

/** Runs the compiler; a missing compiler, header or library becomes the apt-get command. */
async function compile(
  fileName: string,
  recipe: Recipe,
  compiler: string,
  args: string[],
): Promise<void> {
  const install = `${Deno.uid() === 0 ? "" : "sudo "}apt-get install -y ${
    recipe.packages.join(" ")
  }`;
  let output;
  try {
    output = await new Deno.Command(compiler, { args, stdout: "piped", stderr: "piped" }).output();
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    throw new BuildError(
      `cannot build ${fileName}: no compiler "${compiler}" on PATH (${recipe.compilerEnv}); ` +
        `install it with: ${install}`,
    );
  }
  if (output.success) return;
  const log = new TextDecoder().decode(output.stderr);
  const missing = missingDependency(log);
  if (missing !== null) {
    throw new BuildError(
      `cannot build ${fileName}: ${missing} is missing; install it with: ${install}`,
    );
  }
  throw new BuildError(
    `cannot build ${fileName}: ${compiler} exited with code ${output.code}:\n` +
      log.trim().split("\n").slice(-15).join("\n"),
  );
}

/**
 * What a failed compile says is missing (a header or a library to link), or null.
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { missingDependency } from "./build.ts";
 * assertEquals(missingDependency("/usr/bin/ld: cannot find -lopenblas: No such file"), "-lopenblas");
 * assertEquals(
 *   missingDependency("x.cc:3:10: fatal error: gloo/context.h: No such file or directory"),
 *   "the header gloo/context.h",
 * );
 * assertEquals(missingDependency("x.c:1: error: expected ';'"), null);
 * ```
 */
export function missingDependency(log: string): string | null {
  const library = log.match(/cannot find (-l\S+?):?\s/);
  if (library) return library[1];
  const header = log.match(
    /fatal error: (\S+?): No such file or directory|no include path in which to search for (\S+)/,
  );
  return header ? `the header ${header[1] ?? header[2]}` : null;
}

async function fetchText(url: URL): Promise<string> {
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    throw new BuildError(`cannot read ${url}: ${(error as Error).message}`);
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new BuildError(`cannot read ${url}: HTTP ${response.status}`);
  }
  return await response.text();
}

if (import.meta.main) {
  try {
    console.log(JSON.stringify({ path: await ensureBuilt(Deno.args[0]) }));
  } catch (error) {
    console.log(JSON.stringify({ error: (error as Error).message }));
    Deno.exit(1);
  }
}
