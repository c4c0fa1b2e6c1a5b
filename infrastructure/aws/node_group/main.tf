# A group of AWS GPU instances running one dtrain job: one instance per node in a cluster
# placement group, each with its own EFA interfaces and its own cloud-init from
# modules/cloud_init. Node 0 is the master and boots on the interface the root reserved for it,
# so its address is known before any node starts. The root owns what outlives the nodes.

terraform {
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.40.0, < 6.0.0"
    }
  }
}

variable "master_network_interface_id" {
  description = "The EFA interface reserved for node 0; its address is master_addr."
  type        = string
}

variable "subnet_id" {
  description = "Subnet of every interface (one availability zone, as the placement group needs)."
  type        = string
}

variable "security_group_id" {
  description = "Security group of every interface: all traffic within the group (EFA needs it)."
  type        = string
}

variable "placement_group" {
  description = "Cluster placement group of the instances."
  type        = string
}

variable "instance_type" {
  description = "Instance type, e.g. p5.48xlarge."
  type        = string
}

variable "ami_id" {
  description = "AMI with the NVIDIA driver, the EFA driver and the Lustre client."
  type        = string
}

variable "efa_interfaces" {
  description = "EFA interfaces per node, one per network card (p5.48xlarge has 32)."
  type        = number
}

locals {
  names = [for rank in range(var.size) : rank == 0 ? "${var.job.name}-master" : "${var.job.name}-worker-${rank}"]
  # The interfaces on network cards 1 and up, node after node.
  extra_efa = var.efa_interfaces - 1
}

resource "aws_network_interface" "worker" {
  count = var.size - 1

  subnet_id       = var.subnet_id
  security_groups = [var.security_group_id]
  interface_type  = "efa"
  tags            = { Name = "${local.names[count.index + 1]}-efa-0" }
}

resource "aws_network_interface" "extra" {
  count = var.size * local.extra_efa

  subnet_id       = var.subnet_id
  security_groups = [var.security_group_id]
  interface_type  = "efa"
  tags            = { Name = "${local.names[floor(count.index / local.extra_efa)]}-efa-${count.index % local.extra_efa + 1}" }
}

resource "aws_instance" "node" {
  count = var.size

  ami             = var.ami_id
  instance_type   = var.instance_type
  placement_group = var.placement_group

  network_interface {
    device_index         = 0
    network_card_index   = 0
    network_interface_id = count.index == 0 ? var.master_network_interface_id : aws_network_interface.worker[count.index - 1].id
  }

  dynamic "network_interface" {
    for_each = range(1, var.efa_interfaces)
    content {
      device_index         = 1
      network_card_index   = network_interface.value
      network_interface_id = aws_network_interface.extra[count.index * local.extra_efa + network_interface.value - 1].id
    }
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = count.index == 0 ? var.master_boot_disk_gib : var.worker_boot_disk_gib
  }

  metadata_options {
    http_tokens = "required"
  }

  user_data = module.cloud_init[count.index].user_data
  tags      = { Name = local.names[count.index] }
}

output "internal_ips" {
  description = "Private address of each node, node 0 first."
  value       = [for node in aws_instance.node : node.private_ip]
}

output "instance_ids" {
  description = "Instance of each node, node 0 first (for SSM sessions)."
  value       = [for node in aws_instance.node : node.id]
}

output "master_port" {
  description = "The master's rendezvous port (--master-port)."
  value       = module.cloud_init[0].master_port
}

output "snapshot_path" {
  description = "Snapshot file on the shared filesystem."
  value       = module.cloud_init[0].snapshot_path
}
