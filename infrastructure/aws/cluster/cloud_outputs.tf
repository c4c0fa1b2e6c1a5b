# AWS's part of the outputs (the shared ones are in outputs.tf, from ../../common): the master's
# addresses are its Elastic IP and its network interface; the workers have no public address and
# are reached from the master.

locals {
  master_public_ip   = aws_eip.master.public_ip
  master_internal_ip = aws_network_interface.master.private_ip
}

output "instance_ids" {
  description = "Instance of each node, node 0 first."
  value       = module.nodes.instance_ids
}
