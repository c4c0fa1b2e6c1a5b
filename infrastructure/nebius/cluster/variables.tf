# Inputs of the multi-node cluster only; job.tf and nebius.tf hold those it shares. Every value
# that ends up in a node's start-up script is validated, so a typo fails at `terraform plan`
# instead of on a half-booted GPU node.

variable "infiniband_fabric" {
  description = "Physical InfiniBand fabric of the GPU cluster; it must exist in the project's region."
  type        = string

  validation {
    condition     = can(regex("^fabric-[0-9]+$", var.infiniband_fabric))
    error_message = "infiniband_fabric must look like fabric-3."
  }
}

variable "gpus_per_node" {
  description = "GPUs on each node, and so the launcher's --nproc-per-node."
  type        = number
  default     = 8

  validation {
    condition     = contains([1, 2, 4, 8], var.gpus_per_node)
    error_message = "gpus_per_node must be 1, 2, 4 or 8."
  }
}

variable "node_preset" {
  description = "Preset of each node; its GPU count must equal gpus_per_node."
  type        = string
  default     = "8gpu-128vcpu-1600gb"

  validation {
    condition     = can(regex("^[0-9]+gpu-[0-9]+vcpu-[0-9]+gb$", var.node_preset))
    error_message = "node_preset must look like 8gpu-128vcpu-1600gb."
  }

  validation {
    condition     = try(tonumber(regex("^[0-9]+", var.node_preset)) == var.gpus_per_node, false)
    error_message = "node_preset must have as many GPUs as gpus_per_node says."
  }
}

