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
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1.0"
    }
  }

  # The state holds the generated ingest token: it lives in a GCS bucket you
  # own and restrict, never on the machine that applies. The bucket is given
  # at init: terraform init -backend-config=bucket=<state-bucket>
  # (use `init -backend=false` for validate-only runs).
  backend "gcs" {
    prefix = "cocoon-hibernation"
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
