# The shape every node-group module shares (Nebius, AWS, GCP), linked into each as
# node_group.tf: the job, its size and the master's address in, one cloud-init per node out
# (module.cloud_init[rank].user_data), so a fix to what a node runs lands once.

variable "job" {
  description = "The job's settings: local.job of common/job.tf."
  type        = any
}

variable "token" {
  description = "The job secret (DTRAIN_TOKEN)."
  type        = string
  sensitive   = true
}

variable "size" {
  description = "Number of nodes; node 0 is the master."
  type        = number
}

variable "nproc_per_node" {
  description = "Processes per node, one per GPU."
  type        = number
}

variable "master_addr" {
  description = "Node 0's private address, reserved before any node boots (127.0.0.1 for one node)."
  type        = string
}

variable "master_boot_disk_gib" {
  description = "Boot disk of node 0, in GiB."
  type        = number
}

variable "worker_boot_disk_gib" {
  description = "Boot disk of every other node, in GiB."
  type        = number
}

variable "shared_fs" {
  description = "The shared filesystem as modules/cloud_init mounts it (source, type, options, packages)."
  type        = any
}

module "cloud_init" {
  source = "../../modules/cloud_init"
  count  = var.size

  job              = var.job
  token            = var.token
  nnodes           = var.size
  node_rank        = count.index
  nproc_per_node   = var.nproc_per_node
  master_addr      = var.master_addr
  connect_attempts = var.size == 1 ? 1 : 90
  shared_fs        = var.shared_fs
}
