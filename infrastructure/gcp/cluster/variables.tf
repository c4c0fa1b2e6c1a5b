# Inputs of the Google Cloud cluster; job.tf holds those every cloud shares. Every value that
# ends up on a node is validated here, so a typo fails at `terraform plan` instead of on a
# booted GPU node.

variable "project_id" {
  description = "Google Cloud project of every resource."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID such as my-project-123."
  }
}

variable "region" {
  description = "Region of the subnetworks, the reserved address and the placement policy, e.g. us-central1."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must look like us-central1."
  }
}

variable "zone" {
  description = "Zone of the VMs and the Filestore instance; it must be in region and offer the machine type."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone)) && startswith(var.zone, "${var.region}-")
    error_message = "zone must be a zone of region, such as us-central1-a."
  }
}

variable "subnetwork" {
  description = "Name of an existing subnetwork in region for the nodes' primary interfaces (`gcloud compute networks subnets list`)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.subnetwork))
    error_message = "subnetwork must be a subnetwork name such as default."
  }
}

variable "machine_type" {
  description = "A3 machine type with 8 H100 GPUs: a3-highgpu-8g (4 GPU NICs) or a3-megagpu-8g (8)."
  type        = string
  default     = "a3-highgpu-8g"

  validation {
    condition     = contains(["a3-highgpu-8g", "a3-megagpu-8g"], var.machine_type)
    error_message = "machine_type must be a3-highgpu-8g or a3-megagpu-8g."
  }
}

variable "image" {
  description = "Boot image: Ubuntu with the NVIDIA driver and cloud-init."
  type        = string
  default     = "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2204-amd64-with-nvidia-550"

  validation {
    condition     = can(regex("^projects/[a-z0-9-]+/global/images/(family/)?[a-z0-9-]+$", var.image))
    error_message = "image must look like projects/PROJECT/global/images/family/FAMILY."
  }
}

variable "gpu_network_prefix" {
  description = "The GPU networks' subnets are PREFIX.N.0/24, one per GPU NIC; they must not overlap the primary subnetwork."
  type        = string
  default     = "192.168"

  validation {
    condition     = can(regex("^(10\\.[0-9]{1,3}|192\\.168|172\\.(1[6-9]|2[0-9]|3[01]))$", var.gpu_network_prefix))
    error_message = "gpu_network_prefix must be the first two bytes of a private range, such as 192.168 or 10.200."
  }
}

variable "shared_fs_size_gib" {
  description = "Capacity of the Filestore share (BASIC_SSD tier) in GiB."
  type        = number
  default     = 2560

  validation {
    condition     = var.shared_fs_size_gib >= 2560 && var.shared_fs_size_gib <= 65400
    error_message = "shared_fs_size_gib must be between 2560 and 65400 (the BASIC_SSD tier's range)."
  }
}
