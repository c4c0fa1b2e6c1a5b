# Who may SSH to the nodes, for the roots whose firewall dtrain makes (AWS, GCP), linked in as
# ssh.tf.

variable "ssh_cidr" {
  description = "Addresses allowed to SSH to the master's public address."
  type        = string

  validation {
    condition     = can(regex("^([0-9]{1,3}\\.){3}[0-9]{1,3}/([0-9]|[12][0-9]|3[0-2])$", var.ssh_cidr)) && !startswith(var.ssh_cidr, "0.0.0.0/")
    error_message = "ssh_cidr must be a CIDR block such as 203.0.113.7/32, narrower than 0.0.0.0/0."
  }
}
