# Terraform and provider versions of the Google Cloud cluster, and the project and region it goes
# to. Credentials come from Application Default Credentials (`gcloud auth application-default
# login`) or GOOGLE_APPLICATION_CREDENTIALS, never from these files.
terraform {
  required_version = ">= 1.9.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 5.20.0"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.6.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
