// The start-up script each node runs (infrastructure/templates/start-training.sh.tftpl), rendered
// for this machine on loopback with a fake checkout and run: the master launches at once, a worker
// waits for the master's port with bounded retries and resumes from the snapshot, and nothing
// starts without the job token. Its variables are exactly those renderStartTraining() hands it.
import assert from "node:assert/strict";
import { templateVariables } from "./template.ts";
import { fakeCheckout, flagMap, launchArguments, runScript } from "./shell.ts";
import {
  renderStartTraining,
  START_TRAINING_TEMPLATE,
  type StartTrainingVars,
} from "./start_training.ts";
import { TOKEN } from "./clusters.ts";

/** Start-up script values for a run on this machine, on loopback, with a fake checkout. */
function localVars(dir: string, overrides: Partial<StartTrainingVars>): StartTrainingVars {
  return {
    install_dir: `${dir}/checkout`,
    nnodes: 2,
    node_rank: 0,
    nproc_per_node: 1,
    master_addr: "127.0.0.1",
    master_port: 29500,
    connect_attempts: 3,
    connect_interval_s: 1,
    max_restarts: 0,
    log_dir: `${dir}/shared/logs/node-${overrides.node_rank ?? 0}`,
    device: "cpu",
    train_args: ["--epochs", "1", "--save-every", "1", "--batch-size", "8"],
    snapshot_path: `${dir}/shared/snapshot.safetensors`,
    ...overrides,
  };
}

/** Renders the start-up script into a fresh directory with a fake checkout, and runs it. */
async function runStartTraining(
  overrides: Partial<StartTrainingVars>,
  env: Record<string, string>,
) {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-start-" });
  const vars = localVars(dir, overrides);
  fakeCheckout(vars.install_dir);
  const script = await renderStartTraining(vars);
  Deno.writeTextFileSync(`${dir}/start-training.sh`, script);
  const run = await runScript(`${dir}/start-training.sh`, [], env, `${dir}/calls`);
  return { dir, vars, script, run };
}

/** A loopback port with nothing listening on it (one just freed). */
function closedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

Deno.test("the start-up script's variables are exactly those renderStartTraining() hands it", async () => {
  const template = Deno.readTextFileSync(START_TRAINING_TEMPLATE);
  const vars = localVars("/tmp", {});
  assert.deepEqual(await templateVariables(template, "start-training"), new Set(Object.keys(vars)));
});

Deno.test("start-up script: the master launches at once, exactly as its launch section reads", async () => {
  const { vars, script, run } = await runStartTraining({ node_rank: 0 }, { DTRAIN_TOKEN: TOKEN });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.denoCalls.length, 1);
  const [call] = run.denoCalls;
  assert.deepEqual(call.args, ["task", "train", ...launchArguments(script)]);
  assert.equal(call.cwd, vars.install_dir);
  assert.equal(call.tokenSet, true);
  assert.equal(flagMap(launchArguments(script)).get("device"), "cpu");
  assert.ok(Deno.statSync(vars.log_dir).isDirectory);
  assert.ok(!(run.stdout + run.stderr).includes(TOKEN), "the token was printed");
});

Deno.test("start-up script: a worker waits for the master's port, then launches and resumes", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepting = (async () => {
    for await (const connection of listener) connection.close();
  })();
  try {
    const port = (listener.addr as Deno.NetAddr).port;
    const dir = Deno.makeTempDirSync({ prefix: "dtrain-worker-" });
    const vars = localVars(dir, { node_rank: 1, master_port: port });
    Deno.mkdirSync(`${dir}/shared`, { recursive: true });
    Deno.writeTextFileSync(vars.snapshot_path, "snapshot");
    fakeCheckout(vars.install_dir);
    Deno.writeTextFileSync(`${dir}/start.sh`, await renderStartTraining(vars));
    const run = await runScript(`${dir}/start.sh`, [], { DTRAIN_TOKEN: TOKEN }, `${dir}/calls`);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, new RegExp(`master 127\\.0\\.0\\.1:${port} is up`));
    assert.match(run.stderr, /resuming from .*snapshot\.safetensors/);
    const flags = flagMap(run.denoCalls[0].args.slice(2));
    assert.equal(flags.get("node-rank"), "1");
    assert.equal(flags.get("master-port"), String(port));
  } finally {
    listener.close();
    await accepting.catch(() => {});
  }
});

Deno.test("start-up script: a worker gives up after its bounded retries when the master never listens", async () => {
  const started = performance.now();
  const { run } = await runStartTraining(
    { node_rank: 1, master_port: closedPort(), connect_attempts: 2, connect_interval_s: 1 },
    { DTRAIN_TOKEN: TOKEN },
  );
  assert.notEqual(run.code, 0);
  assert.match(run.stderr, /attempt 1 of 2/);
  assert.match(run.stderr, /gave up on master 127\.0\.0\.1:\d+ after 2 attempts/);
  assert.equal(run.denoCalls.length, 0, "launched without a master");
  assert.ok(performance.now() - started < 20_000, "the retries are not bounded");
});

Deno.test("start-up script: refuses to start without DTRAIN_TOKEN", async () => {
  const { run } = await runStartTraining({ node_rank: 0 }, {});
  assert.equal(run.code, 1);
  assert.match(run.stderr, /DTRAIN_TOKEN is not set/);
  assert.equal(run.denoCalls.length, 0);
});
