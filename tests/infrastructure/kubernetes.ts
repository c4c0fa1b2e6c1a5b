// Kubernetes manifests as the infrastructure tests see them: each document checked against the
// Kubernetes API's JSON schema (the validators that kubernetes-models compiles from the API's
// OpenAPI spec), and an Indexed Job's pod rendered the way the Job controller and the kubelet
// would make it: its host name, and the environment its container starts with.
import { parseAllDocuments } from "yaml";
import { Job } from "kubernetes-models/batch/v1";
import { PersistentVolumeClaim, Secret, Service } from "kubernetes-models/v1";
import { runScript, type ScriptRun } from "./shell.ts";

/** A manifest document, as parsed YAML. */
// deno-lint-ignore no-explicit-any
export type Manifest = Record<string, any>;

/** The kinds our manifests use, by `apiVersion/kind`, with the model that validates each. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "v1/Service": Service,
  "v1/Secret": Secret,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "batch/v1/Job": Job,
};

/** The documents of a YAML file; a YAML error throws naming the file. */
export function loadManifests(path: string): Manifest[] {
  return parseAllDocuments(Deno.readTextFileSync(path)).map((doc, i) => {
    if (doc.errors.length > 0) throw new Error(`${path} document ${i}: ${doc.errors[0].message}`);
    return doc.toJS() as Manifest;
  });
}

/** Why a document does not conform to its kind's schema, or null when it does. */
export function schemaProblem(doc: Manifest): string | null {
  const key = `${doc.apiVersion}/${doc.kind}`;
  const Model = MODELS[key];
  if (Model === undefined) {
    return `${key} is not a kind these tests validate (${Object.keys(MODELS).join(", ")})`;
  }
  try {
    new Model(doc as never).validate();
    return null;
  } catch (error) {
    return `${key} ${doc.metadata?.name}: ${error instanceof Error ? error.message : error}`;
  }
}

/** One pod of an Indexed Job, as Kubernetes makes it. */
export interface RenderedPod {
  /** `$(job)-$(index)`: the host name the Job controller gives an indexed pod with a subdomain. */
  hostname: string;
  /** The pod's DNS name through the headless Service named by its subdomain. */
  fqdn: string;
  command: string[];
  workingDir: string;
  /** The container's environment: its `env` entries resolved, plus what the Job adds. */
  env: Record<string, string>;
}

/**
 * Pod `index` of an Indexed Job: the env entries of its first container resolved (plain values,
 * Secret keys from `secrets`, the completion-index annotation), and JOB_COMPLETION_INDEX set.
 * @throws Error naming an env entry that cannot be resolved.
 */
export function renderIndexedPod(
  job: Manifest,
  index: number,
  secrets: Record<string, Record<string, string>>,
): RenderedPod {
  if (job.spec.completionMode !== "Indexed") throw new Error(`${job.metadata.name}: not Indexed`);
  const pod = job.spec.template.spec;
  const [container] = pod.containers;
  const hostname = `${job.metadata.name}-${index}`;
  const annotations: Record<string, string> = {
    "batch.kubernetes.io/job-completion-index": String(index),
  };
  const env: Record<string, string> = { HOSTNAME: hostname, JOB_COMPLETION_INDEX: String(index) };
  for (const entry of container.env ?? []) {
    const from = entry.valueFrom;
    if (entry.value !== undefined) {
      env[entry.name] = String(entry.value);
    } else if (from?.secretKeyRef) {
      const value = secrets[from.secretKeyRef.name]?.[from.secretKeyRef.key];
      if (value === undefined) {
        throw new Error(`env ${entry.name}: no key ${from.secretKeyRef.key} in the Secret given`);
      }
      env[entry.name] = value;
    } else if (from?.fieldRef) {
      const match = /^metadata\.annotations\['(.+)'\]$/.exec(from.fieldRef.fieldPath);
      if (match === null || annotations[match[1]] === undefined) {
        throw new Error(`env ${entry.name}: cannot resolve ${from.fieldRef.fieldPath}`);
      }
      env[entry.name] = annotations[match[1]];
    } else {
      throw new Error(`env ${entry.name}: neither a value nor a Secret or field reference`);
    }
  }
  return {
    hostname,
    fqdn: pod.subdomain ? `${hostname}.${pod.subdomain}` : hostname,
    command: [...container.command, ...(container.args ?? [])],
    workingDir: container.workingDir,
    env,
  };
}

/**
 * Runs a rendered pod's command as its container would: `bash -c SCRIPT NAME ARGS...`, here the
 * script from a file with the ARGS after it, in `checkout` (a fakeCheckout, whose recording deno
 * comes first on PATH); `calls` is where that deno reports.
 * @throws Error when the command is not `bash -c SCRIPT NAME ...`.
 */
export async function runPod(
  pod: RenderedPod,
  checkout: string,
  calls: string,
): Promise<ScriptRun> {
  const [shell, flag, script, name, ...args] = pod.command;
  if (shell !== "bash" || flag !== "-c" || name === undefined) {
    throw new Error(`pod ${pod.hostname}: command is not bash -c SCRIPT NAME: ${pod.command}`);
  }
  const file = `${calls}.sh`;
  Deno.writeTextFileSync(file, script);
  return await runScript(
    file,
    args,
    { ...pod.env, PATH: `${checkout}/.tools/node_modules/.bin:${Deno.env.get("PATH")}` },
    calls,
    checkout,
  );
}
