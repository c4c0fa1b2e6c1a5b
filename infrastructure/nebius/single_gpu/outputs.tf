# Where the VM is (the job token is output by token.tf, only as sensitive).

output "public_ip" {
  description = "Public address of the VM, for SSH."
  value       = module.vm.public_ips[0]
}

output "internal_ip" {
  description = "Private address of the VM."
  value       = module.vm.internal_ips[0]
}

output "snapshot_path" {
  description = "Snapshot file on the shared filesystem; the job resumes from it after a restart."
  value       = module.vm.snapshot_path
}

output "ssh" {
  description = "Command that opens a shell on the VM."
  value       = "ssh ${var.ssh_user}@${module.vm.public_ips[0] == null ? "" : module.vm.public_ips[0]}"
}
