// The Terraform roots as the infrastructure tests render them: one row of CLOUDS per root (where it
// is, its provider, the cloud's answers a plan needs, where its nodes' user data is), and each
// node's cloud-init user data rendered through the root's module calls as `terraform plan` would,
// with the files it writes.
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { parse } from "@cdktf/hcl2json";
import { parse as parseYaml } from "yaml";
import type { Value } from "./expression.ts";
import { type Config, loadConfig } from "./terraform.ts";
import { evaluateAttribute, type Fixtures } from "./terraform_plan.ts";
import { NEBIUS_DIR } from "./start_training.ts";
import { parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";

/** infrastructure/, whose Terraform roots {@linkcode CLOUDS} lists. */
export const INFRA_DIR = resolve(NEBIUS_DIR, "..");

/** The job token the random_password fixture makes (infrastructure/common/token.tf, every root). */
export const TOKEN = "TestToken0123456789abcdefghijklmnopqrstuvwxyzABCD";
/** The master's reserved address: documentation range, only ever text here, never contacted. */
export const MASTER_ADDR = "192.0.2.10";

/**
 * One Terraform root as the infrastructure tests check, plan and render it. Adding a cloud is one
 * row of {@linkcode CLOUDS}: every check (references, module calls, templates, variables, sensitive
 * outputs) and the rendered nodes' start-up and setup scripts then run on its root.
 */
export interface CloudRoot {
  /** What the tests' names call it. */
  name: string;
  /** The root folder. */
  dir: string;
  /** The provider its versions.tf requires: the local name and the source. */
  provider: readonly [name: string, source: string];
  /** What only the cloud knows of the resources the root reads, as a plan would see them. */
  fixtures: Fixtures;
  /** The node instances' resource, through the root's module call. */
  address: string;
  /** The instance's attribute with the user data (with `key`: the map holding it there). */
  attribute: string;
  key?: string;
  /** The fstab line each node mounts the shared filesystem with. */
  fstab: string;
  /** Whether `cluster_size` sets the node count (false: one VM). */
  cluster: boolean;
}

/** Every Terraform root: each cloud's cluster, and Nebius's single-GPU VM. */
export const CLOUDS = [
  {
    name: "Nebius",
    dir: `${INFRA_DIR}/nebius/cluster`,
    provider: ["nebius", "nebius/nebius"],
    fixtures: {
      nebius_compute_v1_filesystem: { shared: { id: "computefilesystem-test" } },
      nebius_vpc_v1_allocation: {
        master: {
          id: "vpcallocation-test",
          status: { details: { allocated_cidr: `${MASTER_ADDR}/32` } },
        },
      },
    },
    address: "module.nodes.nebius_compute_v1_instance.node",
    attribute: "cloud_init_user_data",
    fstab: "dtrain-shared /mnt/shared virtiofs defaults,nofail 0 0",
    cluster: true,
  },
  {
    name: "Nebius single GPU",
    dir: `${INFRA_DIR}/nebius/single_gpu`,
    provider: ["nebius", "nebius/nebius"],
    fixtures: { nebius_compute_v1_filesystem: { shared: { id: "computefilesystem-test" } } },
    address: "module.vm.nebius_compute_v1_instance.node",
    attribute: "cloud_init_user_data",
    fstab: "dtrain-shared /mnt/shared virtiofs defaults,nofail 0 0",
    cluster: false,
  },
  {
    name: "AWS",
    dir: `${INFRA_DIR}/aws/cluster`,
    provider: ["aws", "hashicorp/aws"],
    fixtures: {
      aws_network_interface: { master: { id: "eni-0123456789abcdef0", private_ip: MASTER_ADDR } },
      aws_fsx_lustre_file_system: {
        shared: {
          dns_name: "fs-0123456789abcdef0.fsx.us-east-2.amazonaws.com",
          mount_name: "abcdefgh",
        },
      },
    },
    address: "module.nodes.aws_instance.node",
    attribute: "user_data",
    fstab: "fs-0123456789abcdef0.fsx.us-east-2.amazonaws.com@tcp:/abcdefgh /mnt/shared lustre " +
      "defaults,noatime,flock,_netdev,nofail 0 0",
    cluster: true,
  },
  {
    name: "GCP",
    dir: `${INFRA_DIR}/gcp/cluster`,
    provider: ["google", "hashicorp/google"],
    fixtures: {
      google_compute_address: { master: { address: MASTER_ADDR } },
      google_filestore_instance: { shared: { networks: [{ ip_addresses: ["192.0.2.20"] }] } },
    },
    address: "module.nodes.google_compute_instance.node",
    attribute: "metadata",
    key: "user-data",
    fstab: "192.0.2.20:/dtrain /mnt/shared nfs defaults,_netdev,nofail 0 0",
    cluster: true,
  },
] as const satisfies readonly CloudRoot[];

/** A root's name in {@linkcode CLOUDS}. */
export type CloudName = (typeof CLOUDS)[number]["name"];

/** The row of {@linkcode CLOUDS} named `name`. */
export function cloud(name: CloudName): CloudRoot {
  return CLOUDS.find((root) => root.name === name)!;
}

/** The roots whose node count is `cluster_size`. */
export const CLUSTERS: readonly CloudRoot[] = CLOUDS.filter((root) => root.cluster);

/** What a plan of `root` reads from its cloud: its own fixtures and the job token every root makes. */
export function fixturesOf(root: CloudRoot): Fixtures {
  return { random_password: { token: { result: TOKEN } }, ...root.fixtures };
}

/** A public key file standing in for the user's (the example path need not exist here). */
export const sshKeyPath = (() => {
  const path = Deno.makeTempFileSync({ prefix: "dtrain-key-", suffix: ".pub" });
  Deno.writeTextFileSync(path, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@dtrain\n");
  return path;
})();

/** The values a user would give: the directory's terraform.tfvars.example, with our key file. */
export async function exampleValues(dir: string): Promise<Record<string, Value>> {
  const path = `${dir}/terraform.tfvars.example`;
  const values = await parse(path, Deno.readTextFileSync(path)) as Record<string, Value>;
  return { ...values, ssh_public_key_path: sshKeyPath };
}

/** One node as cloud-init would see it: the parsed user data and the files it writes. */
export interface RenderedNode {
  userData: string;
  cloudInit: Record<string, unknown>;
  files: Map<string, { content: string; permissions: string }>;
}

/** Node `countIndex` of `root`'s instances: its user data, rendered as a plan would. */
export async function renderNode(
  config: Config,
  root: CloudRoot,
  values: Record<string, Value>,
  countIndex?: number,
): Promise<RenderedNode> {
  const value = await evaluateAttribute(config, root.address, root.attribute, {
    values,
    countIndex,
    fixtures: fixturesOf(root),
  });
  const userData = root.key === undefined ? value : (value as Record<string, Value>)[root.key];
  assert.equal(typeof userData, "string");
  const cloudInit = parseYaml(userData as string) as Record<string, unknown>;
  const files = new Map<string, { content: string; permissions: string }>();
  for (const file of cloudInit.write_files as Record<string, string>[]) {
    const content = file.encoding === "b64"
      ? new TextDecoder().decode(Uint8Array.from(atob(file.content), (c) => c.charCodeAt(0)))
      : file.content;
    files.set(file.path, { content, permissions: file.permissions });
  }
  return { userData: userData as string, cloudInit, files };
}

/** The nodes a plan of `root` creates: as many as its instances' count says. */
export async function renderCluster(
  values: Record<string, Value>,
  root: CloudRoot = CLOUDS[0],
): Promise<RenderedNode[]> {
  const config = await loadConfig(root.dir);
  const count = await evaluateAttribute(config, root.address, "count", { values });
  assert.equal(typeof count, "number");
  const nodes = [];
  for (let rank = 0; rank < (count as number); rank++) {
    nodes.push(await renderNode(config, root, values, rank));
  }
  return nodes;
}

/** A launch command line as dtrain's own `deno task train` parser reads it. */
export function trainConfig(args: string[]): TrainConfig {
  const config = parseTrainArgs(args);
  assert.notEqual(config, "help");
  return config as TrainConfig;
}

/** The content of a file the node's cloud-init writes; a missing one fails the test. */
export function fileOf(node: RenderedNode, path: string): string {
  const file = node.files.get(path);
  assert.ok(file, `cloud-init writes no ${path}; it writes ${[...node.files.keys()].join(", ")}`);
  return file.content;
}

/** Where cloud-init writes the start-up script, the setup script, the token and the unit. */
export const START_SCRIPT = "/usr/local/lib/dtrain/start-training.sh";
export const SETUP_SCRIPT = "/usr/local/lib/dtrain/setup-node.sh";
export const JOB_ENV = "/etc/dtrain/job.env";
export const UNIT = "/etc/systemd/system/dtrain-train.service";
