// How initProcessGroup options and the environment resolve into one configuration.
import assert from "node:assert/strict";
import { DistError } from "../../src/distributed/errors.ts";
import { resolveInit } from "../../src/distributed/init_method.ts";

const envOf = (vars: Record<string, string>) => (name: string) => vars[name];
const base = {
  RANK: "1",
  WORLD_SIZE: "4",
  MASTER_ADDR: "127.0.0.1",
  MASTER_PORT: "29500",
  DTRAIN_TOKEN: "secret",
};

function invalid(message: string) {
  return (e: unknown) => e instanceof DistError && e.code === "invalid" && e.message === message;
}

Deno.test("env:// reads rank, world size, store address and token from the environment", () => {
  const init = resolveInit({}, envOf({ ...base, LOCAL_RANK: "0" }));
  assert.deepEqual(
    [init.rank, init.worldSize, init.localRank, init.storeHost, init.storePort, init.token],
    [1, 4, 0, "127.0.0.1", 29500, "secret"],
  );
  assert.equal(init.hostStore, false);
  // Gloo's address is derived at init from the store connection unless DTRAIN_GLOO_HOST names it.
  assert.equal(init.host, "");
  assert.equal(init.restartCount, 0);
  const restarted = resolveInit(
    {},
    envOf({ ...base, DTRAIN_RESTART_COUNT: "2", DTRAIN_GLOO_HOST: "10.0.0.5" }),
  );
  assert.equal(restarted.restartCount, 2);
  assert.equal(restarted.host, "10.0.0.5");
});

Deno.test("rank 0 hosts the store unless DTRAIN_STORE_HOSTED=1", () => {
  assert.equal(resolveInit({}, envOf({ ...base, RANK: "0" })).hostStore, true);
  const hosted = resolveInit({}, envOf({ ...base, RANK: "0", DTRAIN_STORE_HOSTED: "1" }));
  assert.equal(hosted.hostStore, false);
  assert.equal(hosted.launcherStore, true);
});

Deno.test("tcp://host:port names the store; options override the environment", () => {
  const init = resolveInit(
    { initMethod: "tcp://[::1]:1234", rank: 2, worldSize: 3, token: "t" },
    envOf(base),
  );
  assert.deepEqual([init.storeHost, init.storePort, init.rank, init.worldSize], [
    "::1",
    1234,
    2,
    3,
  ]);
});

Deno.test("missing or malformed settings are named", () => {
  assert.throws(
    () => resolveInit({}, envOf({ ...base, RANK: "one" })),
    invalid('initProcessGroup: env RANK must be a non-negative integer, got "one"'),
  );
  assert.throws(
    () => resolveInit({}, envOf({ ...base, RANK: "4" })),
    invalid("initProcessGroup: rank 4 is outside world size 4"),
  );
  const { MASTER_ADDR: _, ...noAddr } = base;
  assert.throws(
    () => resolveInit({}, envOf(noAddr)),
    invalid("initProcessGroup: env MASTER_ADDR is not set (needed by env://)"),
  );
  const { DTRAIN_TOKEN: __, ...noToken } = base;
  assert.throws(
    () => resolveInit({}, envOf(noToken)),
    invalid(
      "initProcessGroup: no job token: set env DTRAIN_TOKEN to the same secret on every rank " +
        "(the launcher does this) or pass { token }",
    ),
  );
  assert.throws(
    () => resolveInit({ initMethod: "file:///tmp/x" }, envOf(base)),
    invalid(
      'initProcessGroup: unknown init method "file:///tmp/x"; use "env://" or "tcp://host:port"',
    ),
  );
  assert.throws(
    () => resolveInit({ initMethod: "tcp://host" }, envOf(base)),
    invalid('initProcessGroup: init method "tcp://host" is not tcp://host:port'),
  );
});

Deno.test("timeoutMs above 2³¹−1 ms is refused (timers would fire at once), 2³¹−1 is accepted", () => {
  assert.equal(resolveInit({ timeoutMs: 2 ** 31 - 1 }, envOf(base)).timeoutMs, 2 ** 31 - 1);
  assert.throws(
    () => resolveInit({ timeoutMs: 2 ** 31 }, envOf(base)),
    invalid(
      "initProcessGroup: timeoutMs must be at most 2147483647 (2³¹−1 ms, about 24.8 days), " +
        "got 2147483648",
    ),
  );
});
