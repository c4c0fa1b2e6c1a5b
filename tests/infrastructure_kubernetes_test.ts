// infrastructure/kubernetes/dtrain-job.yaml, offline: every document conforms to the Kubernetes
// API's schema for its kind, and each pod of the Indexed Job, rendered as Kubernetes makes it,
// starts the launcher with the node rank, node count, master address and token it expects.
import assert from "node:assert/strict";
import {
  loadManifests,
  type Manifest,
  renderIndexedPod,
  runPod,
  schemaProblem,
} from "./infrastructure/kubernetes.ts";
import { fakeCheckout } from "./infrastructure/shell.ts";
import { NEBIUS_DIR } from "./infrastructure/start_training.ts";
import { parseTrainArgs, type TrainConfig } from "../src/train/config.ts";

const MANIFEST = `${NEBIUS_DIR}/../kubernetes/dtrain-job.yaml`;
const TOKEN = "TestToken0123456789abcdefghijklmnopqrstuvwxyzABCD";

function only(docs: Manifest[], kind: string): Manifest {
  const found = docs.filter((doc) => doc.kind === kind);
  assert.equal(found.length, 1, `${kind} documents`);
  return found[0];
}

Deno.test("Kubernetes manifests conform to the Kubernetes API's JSON schemas", () => {
  const docs = loadManifests(MANIFEST);
  assert.deepEqual(docs.map((doc) => doc.kind).sort(), ["Job", "PersistentVolumeClaim", "Service"]);
  for (const doc of docs) assert.equal(schemaProblem(doc), null);
});

Deno.test("the schema check rejects a wrong type, a missing required field and an unknown kind", () => {
  const job = only(loadManifests(MANIFEST), "Job");
  const broken = structuredClone(job);
  broken.spec.completions = "two";
  assert.match(schemaProblem(broken) ?? "", /batch\/v1\/Job dtrain: .*completions must be integer/);
  const noName = structuredClone(job);
  delete noName.spec.template.spec.containers[0].name;
  assert.match(schemaProblem(noName) ?? "", /containers\/0 must have required property name/);
  const service = only(loadManifests(MANIFEST), "Service");
  assert.match(
    schemaProblem({ ...service, spec: { ...service.spec, ports: [{ port: "29500" }] } }) ?? "",
    /port must be integer/,
  );
  assert.match(schemaProblem({ ...job, apiVersion: "batch/v2" }) ?? "", /not a kind/);
});

Deno.test("each pod of the Indexed Job starts the launcher with its rank, the node count, pod 0 as master and the token", async () => {
  const docs = loadManifests(MANIFEST);
  const job = only(docs, "Job");
  const service = only(docs, "Service");
  const secretName = job.spec.template.spec.containers[0].env
    .find((e: Manifest) => e.name === "DTRAIN_TOKEN").valueFrom.secretKeyRef.name;
  const dir = await Deno.makeTempDir({ prefix: "dtrain-k8s-" });
  try {
    // The image's checkout, with a deno on PATH that records how it was called.
    fakeCheckout(`${dir}/checkout`);
    const configs: TrainConfig[] = [];
    for (let index = 0; index < job.spec.completions; index++) {
      const pod = renderIndexedPod(job, index, { [secretName]: { DTRAIN_TOKEN: TOKEN } });
      const run = await runPod(pod, `${dir}/checkout`, `${dir}/calls-${index}`);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.denoCalls.length, 1);
      const [call] = run.denoCalls;
      assert.deepEqual(call.args.slice(0, 2), ["task", "train"]);
      assert.equal(call.tokenSet, true, `pod ${pod.hostname}: no DTRAIN_TOKEN`);
      const config = parseTrainArgs(call.args.slice(2));
      assert.notEqual(config, "help");
      configs.push(config as TrainConfig);
      if (index === 0) {
        // Every launcher's master address names this pod, through the headless Service.
        assert.equal(pod.fqdn, `${job.metadata.name}-0.${service.metadata.name}`);
      }
    }
    assert.deepEqual(configs.map((c) => c.nodeRank), [0, 1]);
    for (const config of configs) {
      assert.equal(config.nnodes, job.spec.completions);
      assert.equal(config.masterAddr, `${job.metadata.name}-0.${service.metadata.name}`);
      assert.equal(config.masterPort, service.spec.ports[0].port);
    }
    assert.deepEqual(configs.map((c) => c.logDir), [
      "/mnt/shared/dtrain/logs/node-0",
      "/mnt/shared/dtrain/logs/node-1",
    ]);
    assert.throws(() => renderIndexedPod(job, 0, {}), /no key DTRAIN_TOKEN/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
