# Inputs of the AWS cluster; job.tf holds those every cloud shares. Every value that ends up on a
# node is validated here, so a typo fails at `terraform plan` instead of on a booted GPU node.

variable "region" {
  description = "AWS region of every resource, e.g. us-east-2."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-gov)?-[a-z]+-[0-9]$", var.region))
    error_message = "region must look like us-east-2."
  }
}

variable "subnet_id" {
  description = "Existing subnet of the nodes and the filesystem; its availability zone must offer the instance type (a capacity reservation or capacity block usually names it)."
  type        = string

  validation {
    condition     = can(regex("^subnet-[0-9a-f]{8,17}$", var.subnet_id))
    error_message = "subnet_id must look like subnet-0123456789abcdef0."
  }
}

variable "instance_type" {
  description = "H100 or H200 instance type with 8 GPUs and EFA."
  type        = string
  default     = "p5.48xlarge"

  validation {
    condition     = contains(["p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"], var.instance_type)
    error_message = "instance_type must be p5.48xlarge, p5e.48xlarge or p5en.48xlarge."
  }
}

variable "ami_id" {
  description = "AMI of the nodes: Ubuntu with the NVIDIA and EFA drivers and the Lustre client, such as the Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)."
  type        = string

  validation {
    condition     = can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "ami_id must look like ami-0123456789abcdef0."
  }
}

variable "efa_interfaces" {
  description = "EFA interfaces per node, one per network card: 32 gives a p5.48xlarge its full 3200 Gbps."
  type        = number
  default     = 32

  validation {
    condition     = var.efa_interfaces >= 1 && var.efa_interfaces <= 32 && floor(var.efa_interfaces) == var.efa_interfaces
    error_message = "efa_interfaces must be a whole number from 1 to 32."
  }
}

variable "shared_fs_size_gib" {
  description = "Size of the FSx for Lustre filesystem (PERSISTENT_2): 1200, or a multiple of 2400, GiB."
  type        = number
  default     = 1200

  validation {
    condition     = var.shared_fs_size_gib == 1200 || (var.shared_fs_size_gib >= 2400 && var.shared_fs_size_gib % 2400 == 0)
    error_message = "shared_fs_size_gib must be 1200 or a multiple of 2400."
  }
}
