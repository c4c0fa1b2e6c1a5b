# Where the nodes are: the master's public address for SSH, internal ones for the rendezvous.
# The job token is output only as sensitive (`terraform output -raw dtrain_token`).

output "master_public_ip" {
  description = "Public address of the master (node 0), for SSH; the workers are reached from it."
  value       = aws_eip.master.public_ip
}

output "master_internal_ip" {
  description = "Private address of the master: every launcher's --master-addr."
  value       = aws_network_interface.master.private_ip
}

output "worker_internal_ips" {
  description = "Private addresses of the workers, node 1 first."
  value       = slice(module.nodes.internal_ips, 1, var.cluster_size)
}

output "instance_ids" {
  description = "Instance of each node, node 0 first."
  value       = module.nodes.instance_ids
}

output "master_port" {
  description = "The master's rendezvous port (--master-port)."
  value       = module.nodes.master_port
}

output "snapshot_path" {
  description = "Snapshot file on the FSx for Lustre filesystem; the job resumes from it after a restart."
  value       = module.nodes.snapshot_path
}

output "ssh_master" {
  description = "Command that opens a shell on the master."
  value       = "ssh ${var.ssh_user}@${aws_eip.master.public_ip}"
}

output "dtrain_token" {
  description = "The job secret (DTRAIN_TOKEN) the launchers share."
  value       = random_password.token.result
  sensitive   = true
}
