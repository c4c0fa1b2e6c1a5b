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

variable "train_args" {
  description = "The train command line, one argument per element, after the launcher flags the recipe sets on every node (--nnodes, --node-rank, --nproc-per-node, --master-addr, --master-port, --max-restarts, --log-dir, --snapshot, --device); the default is the MLP job."
  type        = list(string)
  default     = ["--epochs", "10", "--save-every", "1", "--batch-size", "64"]

  # A second --nnodes or --snapshot would silently fight the recipe's own (the last one given wins).
  validation {
    condition     = alltrue([for arg in var.train_args : !can(regex("^--(nnodes|node-rank|nproc-per-node|master-addr|master-port|max-restarts|log-dir|snapshot|device)(=|$)", arg))])
    error_message = "train_args must not set --nnodes, --node-rank, --nproc-per-node, --master-addr, --master-port, --max-restarts, --log-dir, --snapshot or --device: the recipe sets them on every node (from cluster_size, gpus_per_node, max_restarts and name)."
  }

  validation {
    condition     = alltrue([for arg in var.train_args : !can(regex("[\\x00-\\x1f\\x7f]", arg))])
    error_message = "train_args must not hold control characters (a newline, a tab): each element is one argument."
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
    train_args     = var.train_args
    max_restarts   = var.max_restarts
  }
}
