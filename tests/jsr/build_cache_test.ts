/**
 * The self-build cache against another local user (`nobody`; the tests run as root and `chown`
 * real files): a library it planted, a cache or entry folder it owns or may write to, an empty or
 * unfinished library are rebuilt or refused, never loaded (see [Note: a private build cache] in
 * ffi/build_cache.ts). A planted library writes a marker file from its constructor, so loading
 * it would show.
 * @module
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";

const NOBODY = 65534;
const isRoot = Deno.uid() === 0;

/** Builds libdtrain.so through ffi/build.ts and opens it, as ffi/load.ts does. */
const LOAD = `import { buildLibrary } from "${ROOT}ffi/build.ts";
const path = buildLibrary("libdtrain.so");
Deno.dlopen(path, {});
console.log(JSON.stringify({ path }));
`;

/** A library that announces being loaded. */
const PLANTED_C = `#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
  FILE *f = fopen(getenv("PLANTED_MARKER"), "w");
  if (f) { fputs("loaded\\n", f); fclose(f); }
}
`;

async function loadIn(dir: string, env: Record<string, string>, timeoutMs = 240_000) {
  await Deno.writeTextFile(`${dir}/load.ts`, LOAD);
  return await runDeno({
    args: [`${dir}/load.ts`],
    cwd: dir,
    env: { PLANTED_MARKER: `${dir}/marker`, ...env },
    timeoutMs,
  });
}

async function plantLibrary(dir: string, at: string): Promise<void> {
  await Deno.writeTextFile(`${dir}/planted.c`, PLANTED_C);
  const cc = await new Deno.Command("cc", {
    args: ["-shared", "-fPIC", "-o", at, `${dir}/planted.c`],
  }).output();
  assert.ok(cc.success, new TextDecoder().decode(cc.stderr));
  // With a record that matches it, as the attacker can write too.
  const digest = createHash("sha256").update(await Deno.readFile(at)).digest("hex");
  await Deno.writeTextFile(`${at}.sha256`, `${digest}\n`);
  await Deno.chown(at, NOBODY, NOBODY);
  await Deno.chown(`${at}.sha256`, NOBODY, NOBODY);
}

function assertNotLoaded(dir: string): void {
  assert.throws(
    () => Deno.statSync(`${dir}/marker`),
    Deno.errors.NotFound,
    "the planted library ran",
  );
}

/** The entry folder a run named in its "building" line (a compiler that is missing fails next). */
function entryOf(stderr: string): string {
  const m = stderr.match(/dtrain: building libdtrain\.so into (\S+)/);
  assert.ok(m, stderr);
  return m[1];
}

Deno.test({
  name: "a library planted by another user, with a matching record, is rebuilt and never loaded",
  ignore: !isRoot,
  fn: () =>
    withTempDir("dtrain_cache_", async (dir) => {
      const env = { DTRAIN_CACHE: `${dir}/cache` };
      const first = await loadIn(dir, env);
      assert.equal(first.code, 0, first.stderr);
      const { path } = JSON.parse(first.stdout.trim().split("\n").at(-1)!);
      assert.equal(dirname(path), entryOf(first.stderr));
      for (const folder of [`${dir}/cache`, dirname(path)]) {
        assert.equal((await Deno.stat(folder)).mode! & 0o777, 0o700, folder);
      }
      // From the cache, without building.
      const again = await loadIn(dir, env);
      assert.equal(again.code, 0, again.stderr);
      assert.doesNotMatch(again.stderr, /building/);

      await plantLibrary(dir, path);
      const planted = await loadIn(dir, env);
      assert.equal(planted.code, 0, planted.stderr);
      assertNotLoaded(dir);
      assert.match(
        planted.stderr,
        new RegExp(
          `building libdtrain\\.so into ${dirname(path)} again, not using the one there: ` +
            `it belongs to uid ${NOBODY}, not to this user \\(uid 0\\)`,
        ),
      );
      const rebuilt = await Deno.stat(path);
      assert.equal(rebuilt.uid, 0);
      const digest = createHash("sha256").update(await Deno.readFile(path)).digest("hex");
      assert.equal((await Deno.readTextFile(`${path}.sha256`)).trim(), digest);
    }),
});

/** A missing compiler: each run stops right after deciding whether to build. */
const NO_CC = (dir: string) => ({ CC: `${dir}/no-such-cc` });

Deno.test({
  name: "an empty, unrecorded or world-writable library in the cache is rebuilt, never loaded",
  ignore: !isRoot,
  fn: () =>
    withTempDir("dtrain_cache_", async (dir) => {
      const env = { DTRAIN_CACHE: `${dir}/cache`, ...NO_CC(dir) };
      const first = await loadIn(dir, env, 60_000);
      assert.notEqual(first.code, 0);
      const entry = entryOf(first.stderr);
      const library = join(entry, "libdtrain.so");
      const cases: [string, () => Promise<void>, RegExp][] = [
        ["an empty file", async () => {
          await plantLibrary(dir, library);
          await Deno.chown(library, 0, 0);
          await Deno.truncate(library, 0);
        }, /it does not match its build record \(a truncated or changed file\)/],
        ["a build that never wrote its record", async () => {
          await plantLibrary(dir, library);
          await Deno.chown(library, 0, 0);
          await Deno.remove(`${library}.sha256`);
        }, /it has no build record \(its build did not finish\)/],
        ["a library anyone may write", async () => {
          await plantLibrary(dir, library);
          await Deno.chown(library, 0, 0);
          await Deno.chmod(library, 0o777);
        }, /others can write to it \(mode 0777\)/],
      ];
      for (const [what, plant, reason] of cases) {
        await plant();
        const run = await loadIn(dir, env, 60_000);
        assert.notEqual(run.code, 0, `${what}: ${run.stderr}`);
        assertNotLoaded(dir);
        assert.match(run.stderr, /building libdtrain\.so into \S+ again, not using the one there/);
        assert.match(run.stderr, reason, what);
        assert.match(run.stderr, /no compiler ".*no-such-cc" on PATH/, what);
      }
    }),
});

Deno.test({
  name: "a cache or entry folder another user owns or may write to is refused, naming it",
  ignore: !isRoot,
  fn: () =>
    withTempDir("dtrain_cache_", async (dir) => {
      const cache = `${dir}/cache`;
      const env = { DTRAIN_CACHE: cache, ...NO_CC(dir) };
      const first = await loadIn(dir, env, 60_000);
      const entry = entryOf(first.stderr);
      await plantLibrary(dir, join(entry, "libdtrain.so"));

      const refused = async (what: string, message: RegExp, runEnv = env) => {
        const run = await loadIn(dir, runEnv, 60_000);
        assert.notEqual(run.code, 0, `${what}: ${run.stderr}`);
        assertNotLoaded(dir);
        assert.doesNotMatch(run.stderr, /building/, what);
        assert.match(run.stderr, message, what);
      };
      await Deno.chmod(entry, 0o777);
      await refused(
        "a world-writable entry",
        new RegExp(`refusing the build cache entry ${entry}: others can write to it \\(mode 0777`),
      );
      await Deno.chmod(entry, 0o770);
      await refused("a group-writable entry", /others can write to it \(mode 0770, owner uid 0\)/);
      await Deno.chmod(entry, 0o700);
      await Deno.chown(entry, NOBODY, NOBODY);
      await refused(
        "an entry of another user's",
        new RegExp(`refusing the build cache entry ${entry}: it belongs to uid ${NOBODY}`),
      );

      // DTRAIN_CACHE itself.
      const shared = `${dir}/shared`;
      await Deno.mkdir(shared);
      await Deno.chmod(shared, 0o1777);
      await refused(
        "a world-writable DTRAIN_CACHE",
        new RegExp(`refusing the build cache ${shared}: others can write to it \\(mode 01777`),
        { ...env, DTRAIN_CACHE: shared },
      );
      // A folder above it that another user owns, or anyone may write without the sticky bit.
      for (
        const [above, mode, owner, why] of [
          ["theirs", 0o755, NOBODY, `belongs to uid ${NOBODY}, who could replace it`],
          ["open", 0o777, 0, "may be written by others \\(mode 0777, no sticky bit\\)"],
        ] as const
      ) {
        await Deno.mkdir(`${dir}/${above}/cache`, { recursive: true, mode: 0o700 });
        await Deno.chmod(`${dir}/${above}`, mode);
        await Deno.chown(`${dir}/${above}`, owner, owner);
        await refused(
          `a cache in a folder that ${why}`,
          new RegExp(
            `refusing the build cache ${dir}/${above}/cache: the folder ${dir}/${above} above it ${why}`,
          ),
          { ...env, DTRAIN_CACHE: `${dir}/${above}/cache` },
        );
      }
      // The sticky bit (as /tmp's) keeps others from renaming what is ours.
      await Deno.mkdir(`${dir}/sticky/cache`, { recursive: true, mode: 0o700 });
      await Deno.chmod(`${dir}/sticky`, 0o1777);
      const sticky = await loadIn(dir, { ...env, DTRAIN_CACHE: `${dir}/sticky/cache` }, 60_000);
      assert.match(sticky.stderr, /building libdtrain\.so into .*\/sticky\/cache\//);
    }),
});

Deno.test({
  name:
    "without HOME the cache is a 0700 folder of this user's, and one another user made is refused",
  ignore: !isRoot,
  fn: () =>
    withTempDir("dtrain_cache_", async (dir) => {
      const env = { DTRAIN_CACHE: "", XDG_CACHE_HOME: "", HOME: "", TMPDIR: dir, ...NO_CC(dir) };
      const own = `${dir}/dtrain-cache-0`;
      const run = await loadIn(dir, env, 60_000);
      assert.match(run.stderr, new RegExp(`building libdtrain\\.so into ${own}/0\\.1\\.0-`));
      const info = await Deno.lstat(own);
      assert.ok(info.isDirectory);
      assert.equal(info.mode! & 0o777, 0o700);
      assert.equal(info.uid, 0);

      // Another user got there first.
      await Deno.remove(own, { recursive: true });
      await Deno.mkdir(own, { mode: 0o755 });
      await Deno.chown(own, NOBODY, NOBODY);
      const taken = await loadIn(dir, env, 60_000);
      assert.notEqual(taken.code, 0);
      assert.match(
        taken.stderr,
        new RegExp(
          `refusing the build cache ${own}: it belongs to uid ${NOBODY}, not to this user`,
        ),
      );
      // A symbolic link of another user's, to a folder of ours, is refused too.
      await Deno.remove(own);
      await Deno.mkdir(`${dir}/mine`, { mode: 0o700 });
      await Deno.symlink(`${dir}/mine`, own);
      const chown = await new Deno.Command("chown", { args: ["-h", `${NOBODY}`, own] }).output();
      assert.ok(chown.success);
      const linked = await loadIn(dir, env, 60_000);
      assert.notEqual(linked.code, 0);
      assert.match(linked.stderr, /it is a symbolic link owned by uid 65534/);
    }),
});
