# The job secret every launcher presents at rendezvous, made and output the same way in every root
# (Nebius, AWS, GCP, the single GPU): each links this file in as token.tf. It lives in the
# Terraform state and in each node's user data (/etc/dtrain/job.env, root only), and is output
# only as sensitive (`terraform output -raw dtrain_token`).

resource "random_password" "token" {
  length  = 48
  special = false
}

output "dtrain_token" {
  description = "The job secret (DTRAIN_TOKEN) the launchers share."
  value       = random_password.token.result
  sensitive   = true
}
