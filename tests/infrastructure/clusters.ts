// The Terraform cluster roots as the infrastructure tests render them: where each root is, the
// cloud's answers a plan needs (fixtures), and each node's cloud-init user data rendered through
// the root's module calls as `terraform plan` would, with the files it writes.
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { parse } from "@cdktf/hcl2json";
import { parse as parseYaml } from "yaml";
import type { Value } from "./expression.ts";
import { type Config, evaluateAttribute, type Fixtures, loadConfig } from "./terraform.ts";
import { NEBIUS_DIR } from "./start_training.ts";
import { parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";

/** infrastructure/, and each Terraform root in it. */
export const INFRA_DIR = resolve(NEBIUS_DIR, "..");
export const CLUSTER_DIR = `${NEBIUS_DIR}/cluster`;
export const SINGLE_GPU_DIR = `${NEBIUS_DIR}/single_gpu`;
export const AWS_DIR = `${INFRA_DIR}/aws/cluster`;
export const GCP_DIR = `${INFRA_DIR}/gcp/cluster`;
export const CONFIG_DIRS = [CLUSTER_DIR, SINGLE_GPU_DIR, AWS_DIR, GCP_DIR];
/** The provider each root is for, as its versions.tf names it. */
export const PROVIDERS: Record<string, [string, string]> = {
  [CLUSTER_DIR]: ["nebius", "nebius/nebius"],
  [SINGLE_GPU_DIR]: ["nebius", "nebius/nebius"],
  [AWS_DIR]: ["aws", "hashicorp/aws"],
  [GCP_DIR]: ["google", "hashicorp/google"],
};

/** The job token the random_password fixture makes. */
export const TOKEN = "TestToken0123456789abcdefghijklmnopqrstuvwxyzABCD";
/** The master's reserved address: documentation range, only ever text here, never contacted. */
export const MASTER_ADDR = "192.0.2.10";
/** The resource attributes only the cloud knows, as a plan would see them. */
export const FIXTURES: Fixtures = {
  random_password: { token: { result: TOKEN } },
  nebius_compute_v1_filesystem: { shared: { id: "computefilesystem-test" } },
  nebius_vpc_v1_allocation: {
    master: {
      id: "vpcallocation-test",
      status: { details: { allocated_cidr: `${MASTER_ADDR}/32` } },
    },
  },
  aws_network_interface: { master: { id: "eni-0123456789abcdef0", private_ip: MASTER_ADDR } },
  aws_fsx_lustre_file_system: {
    shared: {
      dns_name: "fs-0123456789abcdef0.fsx.us-east-2.amazonaws.com",
      mount_name: "abcdefgh",
    },
  },
  google_compute_address: { master: { address: MASTER_ADDR } },
  google_filestore_instance: { shared: { networks: [{ ip_addresses: ["192.0.2.20"] }] } },
};

/** Each cloud's cluster root: where a node's user data is, and the fstab line it mounts with. */
export const CLOUDS = [
  {
    cloud: "Nebius",
    dir: CLUSTER_DIR,
    address: "module.nodes.nebius_compute_v1_instance.node",
    attribute: "cloud_init_user_data",
    fstab: "dtrain-shared /mnt/shared virtiofs defaults,nofail 0 0",
  },
  {
    cloud: "AWS",
    dir: AWS_DIR,
    address: "module.nodes.aws_instance.node",
    attribute: "user_data",
    fstab: "fs-0123456789abcdef0.fsx.us-east-2.amazonaws.com@tcp:/abcdefgh /mnt/shared lustre " +
      "defaults,noatime,flock,_netdev,nofail 0 0",
  },
  {
    cloud: "GCP",
    dir: GCP_DIR,
    address: "module.nodes.google_compute_instance.node",
    attribute: "metadata",
    key: "user-data",
    fstab: "192.0.2.20:/dtrain /mnt/shared nfs defaults,_netdev,nofail 0 0",
  },
] as const;

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

/** Node `countIndex` of the resource at `address`: its user data, from `attribute` (or its `key`). */
export async function renderNode(
  config: Config,
  address: string,
  values: Record<string, Value>,
  countIndex?: number,
  attribute = "cloud_init_user_data",
  key?: string,
): Promise<RenderedNode> {
  const value = await evaluateAttribute(config, address, attribute, {
    values,
    countIndex,
    fixtures: FIXTURES,
  });
  const userData = key === undefined ? value : (value as Record<string, Value>)[key];
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

/** Where a root's nodes are: the instance's address, and the attribute (or its key) with the user data. */
export interface NodeSource {
  dir: string;
  address: string;
  attribute: string;
  key?: string;
}

/** The Nebius single-GPU root's one VM. */
export const SINGLE_GPU_VM: NodeSource = {
  dir: SINGLE_GPU_DIR,
  address: "module.vm.nebius_compute_v1_instance.node",
  attribute: "cloud_init_user_data",
};

/** The nodes a plan of a cloud's cluster creates: as many as the instance's count says. */
export async function renderCluster(
  values: Record<string, Value>,
  cloud: NodeSource = CLOUDS[0],
): Promise<RenderedNode[]> {
  const config = await loadConfig(cloud.dir);
  const count = await evaluateAttribute(config, cloud.address, "count", { values });
  assert.equal(typeof count, "number");
  const nodes = [];
  for (let rank = 0; rank < (count as number); rank++) {
    nodes.push(await renderNode(config, cloud.address, values, rank, cloud.attribute, cloud.key));
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
