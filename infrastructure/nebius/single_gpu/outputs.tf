# Where the VM is, and the job token, output only as sensitive.

output "public_ip" {
  description = "Public address of the VM, for SSH."
  value       = try(split("/", nebius_compute_v1_instance.vm.status.network_interfaces[0].public_ip_address.address)[0], null)
}

output "internal_ip" {
  description = "Private address of the VM."
  value       = split("/", nebius_compute_v1_instance.vm.status.network_interfaces[0].ip_address.address)[0]
}

output "snapshot_path" {
  description = "Snapshot file on the shared filesystem; the job resumes from it after a restart."
  value       = "${local.job_dir}/snapshot.safetensors"
}

output "ssh" {
  description = "Command that opens a shell on the VM."
  value       = "ssh ${var.ssh_user}@${try(split("/", nebius_compute_v1_instance.vm.status.network_interfaces[0].public_ip_address.address)[0], "")}"
}

output "dtrain_token" {
  description = "The job secret (DTRAIN_TOKEN) of the launcher."
  value       = random_password.token.result
  sensitive   = true
}
