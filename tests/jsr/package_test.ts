/**
 * dtrain as a JSR user gets it: only the published files, imported over HTTP, with an empty
 * DENO_DIR, an empty library cache and no DTRAIN_LIB, so that the native libraries must build
 * themselves from the shipped sources (see [Note: self-building libraries] in ffi/build.ts).
 * @module
 */

import assert from "node:assert/strict";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { servePackage } from "./_serve.ts";

const TRAIN_A_FEW_STEPS = (url: string) => `
import { F, nn, optim, manualSeed, tensor, randn, tidy } from "${url}mod.ts";
manualSeed(0);
const model = new nn.Sequential(new nn.Linear(8, 16), new nn.ReLU(), new nn.Linear(16, 1));
const opt = new optim.SGD(model.parameters(), { lr: 0.05 });
const x = randn([64, 8]);
const y = x.sum(-1, true);
const losses = [];
for (let step = 0; step < 20; step++) {
  losses.push(tidy(() => {
    const loss = F.mseLoss(model.forward(x), y);
    loss.backward();
    opt.step();
    opt.zeroGrad();
    return loss.item();
  }));
}
console.log(JSON.stringify({ first: losses[0], last: losses.at(-1) }));
`;

const ALL_REDUCE = (url: string) => `
import { dist, tensor } from "${url}mod.ts";
await dist.initProcessGroup({ backend: "gloo" });
const t = tensor([dist.getRank() + 1]);
await dist.allReduce(t, "sum");
console.log("sum " + t.item());
await dist.destroyProcessGroup();
`;

Deno.test("the published files alone, over HTTP with empty caches, train and launch 2 ranks", async () => {
  await using server = await servePackage();
  for (const needed of ["mod.ts", "src/launch/main.ts", "src/train/main.ts", "csrc/sources.json"]) {
    assert.ok(server.files.includes(needed), `${needed} is not published: ${server.files}`);
  }
  assert.ok(!server.files.some((f) => f.startsWith("build/") || f.startsWith("tests/")));
  await withTempDir("dtrain_jsr_", async (dir) => {
    const env = {
      DENO_DIR: `${dir}/deno`,
      DTRAIN_CACHE: `${dir}/cache`,
      DTRAIN_LIB: "",
      DTRAIN_GLOO_LIB: "",
    };
    await Deno.writeTextFile(`${dir}/steps.ts`, TRAIN_A_FEW_STEPS(server.url));
    const steps = await runDeno({ args: [`${dir}/steps.ts`], cwd: dir, env, timeoutMs: 240_000 });
    assert.equal(steps.code, 0, steps.stderr);
    const { first, last } = JSON.parse(steps.stdout.trim().split("\n").at(-1)!);
    assert.ok(last < first / 2, `loss went from ${first} to ${last}`);
    assert.match(
      steps.stderr,
      /dtrain: building libdtrain\.so into .*\/cache\/0\.1\.0-[0-9a-f]{16}/,
    );

    // The served train job, through the served launcher: both ranks need the Gloo library,
    // which neither has; one builds it under the lock while the other waits.
    const launched = await runDeno({
      args: [
        `${server.url}src/train/main.ts`,
        ...["--nproc-per-node", "2", "--master-port", String(freePort())],
        ...["--dataset", "synthetic", "--model", "linear", "--epochs", "1", "--threads", "1"],
        ...["--snapshot", `${dir}/run/snapshot.safetensors`],
      ],
      cwd: dir,
      env,
      timeoutMs: 240_000,
    });
    const output = launched.stdout + launched.stderr;
    assert.equal(launched.code, 0, output);
    assert.deepEqual(launched.leftovers, []);
    assert.equal(output.match(/building libdtrain_gloo\.so/g)?.length, 1, output);
    assert.doesNotMatch(output, /building libdtrain\.so/, "libdtrain.so was built twice");
    assert.match(output, /done: 1 epochs/);

    // The served launcher itself, over a script of the user's that imports the served package.
    await Deno.writeTextFile(`${dir}/allreduce.ts`, ALL_REDUCE(server.url));
    const plain = await runDeno({
      args: [
        `${server.url}src/launch/main.ts`,
        ...["--nproc-per-node", "2", "--master-port", String(freePort())],
        `${dir}/allreduce.ts`,
      ],
      cwd: dir,
      env,
      timeoutMs: 120_000,
    });
    assert.equal(plain.code, 0, plain.stdout + plain.stderr);
    assert.deepEqual(plain.leftovers, []);
    for (const rank of [0, 1]) {
      assert.match(plain.stdout, new RegExp(`^\\[rank ${rank}\\] sum 3$`, "m"));
    }
    assert.doesNotMatch(plain.stderr, /building/, "both libraries came from the cache");
  });
});

Deno.test("a missing compiler names the apt-get command that installs it", async () => {
  await withTempDir("dtrain_nocc_", async (dir) => {
    const script = `${dir}/build.ts`;
    await Deno.writeTextFile(
      script,
      `import { buildLibrary } from "${ROOT}ffi/build.ts";\nbuildLibrary("libdtrain.so");\n`,
    );
    const run = await runDeno({
      args: [script],
      env: { DTRAIN_CACHE: dir, CC: `${dir}/no-such-cc` },
      timeoutMs: 60_000,
    });
    assert.notEqual(run.code, 0);
    assert.match(
      run.stderr,
      /no compiler ".*no-such-cc" on PATH \(CC\); install it with: (sudo )?apt-get install -y build-essential libopenblas-dev/,
    );
  });
});

Deno.test("a missing header names the apt-get command that installs it", async () => {
  await withTempDir("dtrain_noheader_", async (dir) => {
    // The real compiler, over an empty system root: as on a machine without the C library's or
    // OpenBLAS's headers and libraries.
    const cc = `${dir}/cc`;
    await Deno.writeTextFile(cc, '#!/bin/sh\nexec cc --sysroot=/nonexistent "$@"\n');
    await Deno.chmod(cc, 0o755);
    const script = `${dir}/build.ts`;
    await Deno.writeTextFile(
      script,
      `import { buildLibrary } from "${ROOT}ffi/build.ts";\nbuildLibrary("libdtrain.so");\n`,
    );
    const run = await runDeno({
      args: [script],
      env: { DTRAIN_CACHE: `${dir}/cache`, CC: cc },
      timeoutMs: 120_000,
    });
    assert.notEqual(run.code, 0);
    assert.match(
      run.stderr,
      /cannot build libdtrain\.so: the header \S+\.h is missing; install it with: (sudo )?apt-get install -y build-essential libopenblas-dev/,
    );
  });
});

Deno.test("csrc/sources.json lists every source file the Makefile compiles", async () => {
  const lists = JSON.parse(await Deno.readTextFile(`${ROOT}csrc/sources.json`));
  for (const dir of ["core", "gloo", "shm"]) {
    const onDisk = [...Deno.readDirSync(`${ROOT}csrc/${dir}`)].map((e) => e.name)
      .filter((n) => /\.(c|cc|h)$/.test(n)).sort();
    assert.deepEqual(
      [...lists[dir]].sort(),
      onDisk,
      `csrc/sources.json "${dir}" must list exactly the files in csrc/${dir}/ (the packaged build compiles these)`,
    );
  }
});
