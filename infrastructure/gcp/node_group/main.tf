# A group of Google Cloud A3 VMs running one dtrain job: one VM per node under a compact
# placement policy, each with its primary interface and one gVNIC per GPU network (A3's
# high-bandwidth GPU-to-GPU networking), and its own cloud-init from modules/cloud_init. Node 0
# is the master and takes the internal address the root reserved for it.

terraform {
  required_version = ">= 1.9.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 5.20.0"
    }
  }
}

variable "zone" {
  description = "Zone of every VM."
  type        = string
}

variable "machine_type" {
  description = "A3 machine type, e.g. a3-highgpu-8g."
  type        = string
}

variable "image" {
  description = "Boot image with the NVIDIA driver and cloud-init."
  type        = string
}

variable "subnetwork" {
  description = "Self link of the primary subnetwork."
  type        = string
}

variable "gpu_subnetworks" {
  description = "Self links of the GPU networks' subnetworks, one gVNIC each."
  type        = list(string)
}

variable "placement_policy" {
  description = "Self link of the compact placement policy."
  type        = string
}

locals {
  names = [for rank in range(var.size) : rank == 0 ? "${var.job.name}-master" : "${var.job.name}-worker-${rank}"]
}

resource "google_compute_instance" "node" {
  count = var.size

  name              = local.names[count.index]
  zone              = var.zone
  machine_type      = var.machine_type
  resource_policies = [var.placement_policy]

  boot_disk {
    initialize_params {
      image = var.image
      size  = count.index == 0 ? var.master_boot_disk_gib : var.worker_boot_disk_gib
      type  = "pd-ssd"
    }
  }

  network_interface {
    subnetwork = var.subnetwork
    network_ip = count.index == 0 ? var.master_addr : null
    nic_type   = "GVNIC"
    access_config {}
  }

  dynamic "network_interface" {
    for_each = var.gpu_subnetworks
    content {
      subnetwork = network_interface.value
      nic_type   = "GVNIC"
    }
  }

  # GPUs cannot live-migrate: the VM stops for host maintenance and restarts, and the job
  # resumes from the snapshot.
  scheduling {
    on_host_maintenance = "TERMINATE"
    automatic_restart   = true
  }

  metadata = {
    user-data = module.cloud_init[count.index].user_data
  }
}

output "public_ips" {
  description = "Public address of each node, node 0 first."
  value       = [for node in google_compute_instance.node : node.network_interface[0].access_config[0].nat_ip]
}

output "internal_ips" {
  description = "Private address of each node, node 0 first."
  value       = [for node in google_compute_instance.node : node.network_interface[0].network_ip]
}

output "master_port" {
  description = "The master's rendezvous port (--master-port)."
  value       = module.cloud_init[0].master_port
}

output "snapshot_path" {
  description = "Snapshot file on the shared filesystem."
  value       = module.cloud_init[0].snapshot_path
}
