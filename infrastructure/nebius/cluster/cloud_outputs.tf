# Nebius's part of the outputs (the shared ones are in outputs.tf, from ../../common): the master's
# private address is allocated up front (local.master_addr in main.tf); every node has a public one.

locals {
  master_public_ip   = module.nodes.public_ips[0]
  master_internal_ip = local.master_addr
}

output "worker_public_ips" {
  description = "Public addresses of the workers, node 1 first."
  value       = slice(module.nodes.public_ips, 1, var.cluster_size)
}
