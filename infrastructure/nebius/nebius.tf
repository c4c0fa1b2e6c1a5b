# The Nebius inputs both Nebius roots share (linked in as nebius.tf): where the nodes go and
# what they boot.

variable "project_id" {
  description = "Nebius project that owns every resource (`nebius iam project list`)."
  type        = string

  validation {
    condition     = can(regex("^project-[a-z0-9]+$", var.project_id))
    error_message = "project_id must look like project-e00abc..., the ID shown by `nebius iam project list`."
  }
}

variable "subnet_name" {
  description = "Name of an existing subnet in the project (`nebius vpc subnet list`); every node gets an address in it."
  type        = string

  validation {
    condition     = length(var.subnet_name) > 0
    error_message = "subnet_name must name an existing subnet."
  }
}

variable "platform" {
  description = "Compute platform of the nodes."
  type        = string
  default     = "gpu-h100-sxm"

  validation {
    condition     = can(regex("^gpu-[a-z0-9-]+$", var.platform))
    error_message = "platform must be a GPU platform such as gpu-h100-sxm."
  }
}

variable "image_family" {
  description = "Boot image family: an Ubuntu image with the NVIDIA driver and CUDA."
  type        = string
  default     = "ubuntu24.04-cuda12"

  validation {
    condition     = can(regex("^ubuntu[0-9]{2}\\.04-[a-z0-9.-]+$", var.image_family))
    error_message = "image_family must be an Ubuntu LTS image family such as ubuntu24.04-cuda12."
  }
}

variable "shared_fs_size_gib" {
  description = "Size of the shared filesystem that holds snapshots and logs, in GiB."
  type        = number
  default     = 256

  validation {
    condition     = var.shared_fs_size_gib >= 32 && var.shared_fs_size_gib <= 1048576
    error_message = "shared_fs_size_gib must be between 32 and 1048576."
  }
}

locals {
  # The shared filesystem reaches each VM as a virtiofs device named by this tag.
  shared_fs = {
    source   = "dtrain-shared"
    type     = "virtiofs"
    options  = "defaults,nofail"
    packages = ""
  }
}
