# The inputs of every multi-node root (Nebius, AWS, GCP cluster), linked in as cluster.tf.

variable "cluster_size" {
  description = "Number of nodes; node 0 is the master that hosts the rendezvous."
  type        = number
  default     = 2

  validation {
    condition     = var.cluster_size >= 1 && floor(var.cluster_size) == var.cluster_size
    error_message = "cluster_size must be a whole number of nodes, at least 1."
  }
}

variable "master_boot_disk_gib" {
  description = "Size of the master's boot disk in GiB."
  type        = number
  default     = 200

  validation {
    condition     = var.master_boot_disk_gib >= 64 && var.master_boot_disk_gib <= 4096
    error_message = "master_boot_disk_gib must be between 64 and 4096."
  }
}

variable "worker_boot_disk_gib" {
  description = "Size of each worker's boot disk in GiB."
  type        = number
  default     = 200

  validation {
    condition     = var.worker_boot_disk_gib >= 64 && var.worker_boot_disk_gib <= 4096
    error_message = "worker_boot_disk_gib must be between 64 and 4096."
  }
}
