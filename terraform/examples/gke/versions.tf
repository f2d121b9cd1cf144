terraform {
  required_version = ">= 1.5.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4, < 3.0"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.6, < 4.0"
    }
  }

  # The state holds the generated ingest token: keep it in an access-controlled
  # bucket. Fill in and uncomment (or pass -backend-config at init).
  # backend "gcs" {
  #   bucket = "REPLACE_ME-tfstate"
  #   prefix = "cocoon-hibernation"
  # }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
