# Inputs of the single-GPU VM only; job.tf and nebius.tf hold those it shares with the cluster.

variable "preset" {
  description = "Preset of the VM: one GPU."
  type        = string
  default     = "1gpu-16vcpu-200gb"

  validation {
    condition     = can(regex("^1gpu-[0-9]+vcpu-[0-9]+gb$", var.preset))
    error_message = "preset must be a one-GPU preset such as 1gpu-16vcpu-200gb."
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
