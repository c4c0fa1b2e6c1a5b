# Inputs of the single-GPU VM; the same names and checks as the cluster's where they overlap.

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

variable "name" {
  description = "Prefix of every resource name; lets two jobs share a project."
  type        = string
  default     = "dtrain"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}$", var.name))
    error_message = "name must be 1 to 31 lowercase letters, digits or dashes, starting with a letter."
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

variable "preset" {
  description = "Preset of the VM: one GPU."
  type        = string
  default     = "1gpu-16vcpu-200gb"

  validation {
    condition     = can(regex("^1gpu-[0-9]+vcpu-[0-9]+gb$", var.preset))
    error_message = "preset must be a one-GPU preset such as 1gpu-16vcpu-200gb."
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

variable "boot_disk_gib" {
  description = "Size of the VM's boot disk in GiB."
  type        = number
  default     = 200

  validation {
    condition     = var.boot_disk_gib >= 64 && var.boot_disk_gib <= 4096
    error_message = "boot_disk_gib must be between 64 and 4096."
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

variable "ssh_user" {
  description = "User created on every node for SSH access."
  type        = string
  default     = "dtrain"

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user)) && var.ssh_user != "root"
    error_message = "ssh_user must be a lowercase Linux user name other than root."
  }
}

variable "ssh_public_key_path" {
  description = "Path of the SSH public key installed for ssh_user."
  type        = string
  default     = "~/.ssh/id_ed25519.pub"

  validation {
    condition     = fileexists(pathexpand(var.ssh_public_key_path))
    error_message = "ssh_public_key_path must name an existing public key file."
  }
}

variable "repo_url" {
  description = "Git URL that every node clones dtrain from."
  type        = string

  validation {
    condition     = can(regex("^(https://|git@)[A-Za-z0-9._~:/@+-]+$", var.repo_url))
    error_message = "repo_url must be an https:// or git@ URL without spaces or quotes."
  }
}

variable "repo_ref" {
  description = "Branch, tag or commit of dtrain to check out."
  type        = string
  default     = "main"

  validation {
    condition     = can(regex("^[A-Za-z0-9._/-]+$", var.repo_ref))
    error_message = "repo_ref must be a branch, tag or commit without spaces or quotes."
  }
}

variable "epochs" {
  description = "Epochs the job trains for (train flag --epochs)."
  type        = number
  default     = 10

  validation {
    condition     = var.epochs >= 1 && floor(var.epochs) == var.epochs
    error_message = "epochs must be a whole number, at least 1."
  }
}

variable "save_every" {
  description = "Epochs between snapshots on the shared filesystem (train flag --save-every)."
  type        = number
  default     = 1

  validation {
    condition     = var.save_every >= 1 && floor(var.save_every) == var.save_every
    error_message = "save_every must be a whole number of epochs, at least 1."
  }
}

variable "batch_size" {
  description = "Per-process batch size (train flag --batch-size)."
  type        = number
  default     = 64

  validation {
    condition     = var.batch_size >= 1 && floor(var.batch_size) == var.batch_size
    error_message = "batch_size must be a whole number, at least 1."
  }
}

variable "max_restarts" {
  description = "Times the launcher restarts this node's workers after a failure (--max-restarts)."
  type        = number
  default     = 3

  validation {
    condition     = var.max_restarts >= 0 && floor(var.max_restarts) == var.max_restarts
    error_message = "max_restarts must be a whole number, 0 or more."
  }
}
