terraform {
  # 1.5: `check`-free, but validation blocks referencing only their own variable
  # and optional object attributes are what this module relies on.
  required_version = ">= 1.5.0"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 6.x is the first line with google_cloudfunctions2_function
      # build_config.service_account and event_trigger.retry_policy stable;
      # 8.x may rename arguments, so the upper bound is explicit.
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
    # time_sleep: the two waits a first apply needs (main.tf, monitoring.tf).
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1.0"
    }
  }
}
