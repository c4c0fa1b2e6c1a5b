# The outputs every cluster root shares, linked in as outputs.tf. Where the nodes are: the master's
# public address for SSH, internal ones for the rendezvous. Each root's cloud_outputs.tf sets the two
# addresses that differ by cloud (local.master_public_ip, local.master_internal_ip) and adds its
# own outputs. The job token, the only secret, is output by token.tf, only as sensitive.

output "master_public_ip" {
  description = "Public address of the master (node 0), for SSH."
  value       = local.master_public_ip
}

output "master_internal_ip" {
  description = "Private address of the master: every launcher's --master-addr."
  value       = local.master_internal_ip
}

output "worker_internal_ips" {
  description = "Private addresses of the workers, node 1 first."
  value       = slice(module.nodes.internal_ips, 1, var.cluster_size)
}

output "master_port" {
  description = "The master's rendezvous port (--master-port)."
  value       = module.nodes.master_port
}

output "snapshot_path" {
  description = "Snapshot file on the shared filesystem; the job resumes from it after a restart."
  value       = module.nodes.snapshot_path
}

output "ssh_master" {
  description = "Command that opens a shell on the master."
  value       = "ssh ${var.ssh_user}@${local.master_public_ip}"
}
