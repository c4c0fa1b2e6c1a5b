# A group of Nebius GPU VMs running one dtrain job: a boot disk and a VM per node, each with the
# shared filesystem attached and its own cloud-init from modules/cloud_init. Node 0 is the
# master; with one node it is the whole job. The roots (cluster, single_gpu) own what outlives
# the nodes: the filesystem, the token and the master's reserved address.

terraform {
  required_version = ">= 1.9.0"

  required_providers {
    nebius = {
      source  = "nebius/nebius"
      version = ">= 0.6.8"
    }
  }
}

variable "master_allocation_id" {
  description = "The allocation that reserves node 0's address, or null to take any."
  type        = string
  default     = null
}

variable "project_id" {
  description = "Nebius project of every resource."
  type        = string
}

variable "subnet_id" {
  description = "Subnet of the nodes' interfaces."
  type        = string
}

variable "platform" {
  description = "Compute platform, e.g. gpu-h100-sxm."
  type        = string
}

variable "preset" {
  description = "Preset of each node, e.g. 8gpu-128vcpu-1600gb."
  type        = string
}

variable "image_family" {
  description = "Boot image family."
  type        = string
}

variable "gpu_cluster_id" {
  description = "The InfiniBand GPU cluster the nodes join, or null for none."
  type        = string
  default     = null
}

variable "filesystem_id" {
  description = "The shared filesystem every node mounts at /mnt/shared."
  type        = string
}

locals {
  names = [for rank in range(var.size) : var.size == 1 ? var.job.name : rank == 0 ? "${var.job.name}-master" : "${var.job.name}-worker-${rank}"]
}

resource "nebius_compute_v1_disk" "boot" {
  count = var.size

  parent_id        = var.project_id
  name             = "${local.names[count.index]}-boot"
  type             = "NETWORK_SSD"
  block_size_bytes = 4096
  size_gibibytes   = count.index == 0 ? var.master_boot_disk_gib : var.worker_boot_disk_gib

  source_image_family = {
    image_family = var.image_family
  }
}

resource "nebius_compute_v1_instance" "node" {
  count = var.size

  parent_id = var.project_id
  name      = local.names[count.index]
  hostname  = local.names[count.index]

  resources = {
    platform = var.platform
    preset   = var.preset
  }

  gpu_cluster = var.gpu_cluster_id == null ? null : {
    id = var.gpu_cluster_id
  }

  boot_disk = {
    attach_mode = "READ_WRITE"
    existing_disk = {
      id = nebius_compute_v1_disk.boot[count.index].id
    }
  }

  filesystems = [
    {
      attach_mode = "READ_WRITE"
      mount_tag   = var.shared_fs.source
      existing_filesystem = {
        id = var.filesystem_id
      }
    }
  ]

  network_interfaces = [
    {
      name      = "eth0"
      subnet_id = var.subnet_id
      ip_address = {
        allocation_id = count.index == 0 ? var.master_allocation_id : null
      }
      public_ip_address = {}
    }
  ]

  cloud_init_user_data = module.cloud_init[count.index].user_data
}

output "public_ips" {
  description = "Public address of each node, node 0 first."
  value       = [for node in nebius_compute_v1_instance.node : try(split("/", node.status.network_interfaces[0].public_ip_address.address)[0], null)]
}

output "internal_ips" {
  description = "Private address of each node, node 0 first."
  value       = [for node in nebius_compute_v1_instance.node : split("/", node.status.network_interfaces[0].ip_address.address)[0]]
}

output "master_port" {
  description = "The master's rendezvous port (--master-port)."
  value       = module.cloud_init[0].master_port
}

output "snapshot_path" {
  description = "Snapshot file on the shared filesystem."
  value       = module.cloud_init[0].snapshot_path
}
