# Terraform and provider versions of the AWS cluster, and the region it goes to. Credentials come
# from the usual AWS chain (AWS_PROFILE, environment variables, SSO), never from these files.
terraform {
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.40.0, < 6.0.0"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.6.0"
    }
  }
}

provider "aws" {
  region = var.region
}
