// infrastructure/kubernetes/dtrain-job.yaml, offline: every document conforms to the Kubernetes
// API's schema for its kind; the Indexed Job, its headless Service, the Secret token and the shared
// volume agree; and each pod of the Job, rendered as Kubernetes makes it, starts the launcher with
// the node rank, node count, master address and token it expects.
import assert from "node:assert/strict";
import {
  loadManifests,
  type Manifest,
  renderIndexedPod,
  runPod,
  schemaProblem,
} from "./kubernetes.ts";
import { fakeCheckout, flagMap, shellWords } from "./shell.ts";
import { INFRA_DIR, TOKEN, trainConfig } from "./clusters.ts";
import { parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";

const MANIFEST = `${INFRA_DIR}/kubernetes/dtrain-job.yaml`;

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

Deno.test("Kubernetes manifest: Indexed Job, headless Service, Secret token and shared volume agree", () => {
  const docs = loadManifests(MANIFEST);
  const service = only(docs, "Service");
  const job = only(docs, "Job");
  const claim = only(docs, "PersistentVolumeClaim");
  const pod = job.spec.template.spec;
  const [container] = pod.containers;

  assert.equal(service.spec.clusterIP, "None");
  assert.equal(service.spec.selector["job-name"], job.metadata.name);
  assert.equal(pod.subdomain, service.metadata.name);
  assert.equal(job.spec.completionMode, "Indexed");
  assert.equal(job.spec.parallelism, job.spec.completions);
  assert.deepEqual(claim.spec.accessModes, ["ReadWriteMany"]);

  assert.deepEqual(container.command.slice(0, 2), ["bash", "-c"]);
  const script: string = container.command[2];
  const words = shellWords(script.slice(script.indexOf("exec deno task train")));
  assert.deepEqual(words.slice(0, 4), ["exec", "deno", "task", "train"]);
  assert.equal(words.at(-1), "$@", "the container's args come after the Job's own flags");
  const ownFlags = words.slice(4, -1);
  const flags = flagMap(ownFlags);
  assert.equal(flags.get("nnodes"), String(job.spec.completions));
  assert.equal(flags.get("node-rank"), "$JOB_COMPLETION_INDEX");
  const indexed = [
    ...ownFlags.map((word) => word.replaceAll("$JOB_COMPLETION_INDEX", "1")),
    ...container.args,
  ];
  assert.equal(trainConfig(indexed).nodeRank, 1);
  assert.equal(flags.get("master-addr"), `${job.metadata.name}-0.${service.metadata.name}`);
  assert.equal(Number(flags.get("master-port")), service.spec.ports[0].port);
  assert.equal(container.ports[0].containerPort, service.spec.ports[0].targetPort);
  assert.equal(String(container.resources.limits["nvidia.com/gpu"]), flags.get("nproc-per-node"));

  const token = container.env.find((e: { name: string }) => e.name === "DTRAIN_TOKEN");
  assert.ok(token?.valueFrom?.secretKeyRef?.name, "DTRAIN_TOKEN must come from a Secret");
  const mount = container.volumeMounts.find((m: { mountPath: string }) =>
    flags.get("snapshot")!.startsWith(`${m.mountPath}/`)
  );
  assert.ok(mount, "the snapshot must be on a mounted volume");
  const volume = pod.volumes.find((v: { name: string }) => v.name === mount.name);
  assert.equal(volume.persistentVolumeClaim.claimName, claim.metadata.name);
});
