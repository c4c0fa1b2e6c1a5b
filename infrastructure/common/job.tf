# The job's inputs, the same in every root (Nebius, AWS, GCP): each root links this file in as
# job.tf, so a check or default changes once. local.job hands them to the node-group modules.

variable "name" {
  description = "Prefix of every resource name; lets two jobs share a project."
  type        = string
  default     = "dtrain"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}$", var.name))
    error_message = "name must be 1 to 31 lowercase letters, digits or dashes, starting with a letter."
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

locals {
  job = {
    name           = var.name
    ssh_user       = var.ssh_user
    ssh_public_key = trimspace(file(pathexpand(var.ssh_public_key_path)))
    repo_url       = var.repo_url
    repo_ref       = var.repo_ref
    epochs         = var.epochs
    save_every     = var.save_every
    batch_size     = var.batch_size
    max_restarts   = var.max_restarts
  }
}
