# One node's cloud-init user data, for every cloud: the shared templates rendered with the job's
# settings, this node's rank and the master's address. A node-group module calls it once per node.

terraform {
  required_version = ">= 1.9.0"
}

variable "job" {
  description = "The job's settings: local.job of common/job.tf (name, ssh user and key, repository, train command line)."
  type = object({
    name           = string
    ssh_user       = string
    ssh_public_key = string
    repo_url       = string
    repo_ref       = string
    train_args     = list(string)
    max_restarts   = number
  })
}

variable "token" {
  description = "The job secret (DTRAIN_TOKEN) every launcher presents at rendezvous."
  type        = string
  sensitive   = true
}

variable "nnodes" {
  description = "Nodes in the job (--nnodes)."
  type        = number
}

variable "node_rank" {
  description = "This node's rank (--node-rank); 0 hosts the rendezvous."
  type        = number
}

variable "nproc_per_node" {
  description = "Processes on this node, one per GPU (--nproc-per-node)."
  type        = number
}

variable "master_addr" {
  description = "Node 0's private address (--master-addr), known before any node boots."
  type        = string
}

variable "connect_attempts" {
  description = "Times a worker tries the master's port before it gives up."
  type        = number
}

variable "shared_fs" {
  description = "The shared filesystem as one /etc/fstab line's source, type and options, and the Debian packages its client needs (space-separated, may be empty)."
  type = object({
    source   = string
    type     = string
    options  = string
    packages = string
  })
}

locals {
  master_port       = 29500
  install_dir       = "/opt/dtrain"
  shared_mount_path = "/mnt/shared"
  job_dir           = "${local.shared_mount_path}/${var.job.name}"
}

output "user_data" {
  description = "The node's #cloud-config; it holds the job token."
  sensitive   = true
  value = templatefile("${path.module}/../../templates/cloud-init.yaml.tftpl", {
    ssh_user           = var.job.ssh_user
    ssh_public_key     = var.job.ssh_public_key
    repo_url           = var.job.repo_url
    repo_ref           = var.job.repo_ref
    install_dir        = local.install_dir
    shared_fs_source   = var.shared_fs.source
    shared_fs_type     = var.shared_fs.type
    shared_fs_options  = var.shared_fs.options
    shared_fs_packages = var.shared_fs.packages
    shared_mount_path  = local.shared_mount_path
    dtrain_token       = var.token
    start_training = base64encode(templatefile("${path.module}/../../templates/start-training.sh.tftpl", {
      install_dir        = local.install_dir
      nnodes             = var.nnodes
      node_rank          = var.node_rank
      nproc_per_node     = var.nproc_per_node
      master_addr        = var.master_addr
      master_port        = local.master_port
      connect_attempts   = var.connect_attempts
      connect_interval_s = 10
      max_restarts       = var.job.max_restarts
      log_dir            = "${local.job_dir}/logs/node-${var.node_rank}"
      device             = "cuda"
      train_args         = var.job.train_args
      snapshot_path      = "${local.job_dir}/snapshot.safetensors"
    }))
  })
}

output "master_port" {
  description = "The master's rendezvous port (--master-port)."
  value       = local.master_port
}

output "snapshot_path" {
  description = "Snapshot file on the shared filesystem; the job resumes from it after a restart."
  value       = "${local.job_dir}/snapshot.safetensors"
}
