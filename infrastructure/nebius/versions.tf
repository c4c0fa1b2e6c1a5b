# Terraform and provider versions of both Nebius roots (linked in as versions.tf), and how the
# Nebius provider authenticates: a service account whose key is named by environment variables.
terraform {
  # 1.9 is the first release whose variable validations may refer to other variables.
  required_version = ">= 1.9.0"

  required_providers {
    nebius = {
      source  = "nebius/nebius"
      version = ">= 0.6.8"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.6.0"
    }
  }
}

provider "nebius" {
  service_account = {
    account_id_env       = "NEBIUS_SA_ID"
    public_key_id_env    = "NEBIUS_AUTHKEY_PUBLIC_ID"
    private_key_file_env = "NEBIUS_AUTHKEY_PRIVATE_PATH"
  }
}
