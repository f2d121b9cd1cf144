variable "project_id" {
  description = "Google Cloud project for the functions and the snapshot repository."
  type        = string
}

variable "region" {
  description = "Region of the functions (e.g. europe-west1)."
  type        = string
}

variable "name_prefix" {
  description = "Prefix of every resource name (3-13 characters)."
  type        = string
  default     = "cocoon"
}

variable "environment" {
  description = "Value of the `env` label on every resource."
  type        = string
  default     = "prod"

  validation {
    condition     = can(regex("^[a-z0-9-]{1,63}$", var.environment))
    error_message = "environment must be a label value (lowercase letters, digits, hyphens)."
  }
}

variable "gke_cluster" {
  description = "GKE cluster running cocoonstack: name and location (zone or region)."
  type = object({
    name     = string
    location = string
  })
}

variable "artifact_registry" {
  description = "Docker repository for the <vm>:hibernate snapshots: location and repository ID."
  type = object({
    location      = string
    repository_id = string
  })
}

variable "namespaces" {
  description = "Namespaces the functions act in; empty = all."
  type        = list(string)
  default     = []
}

variable "alert_notification_channels" {
  description = "Notification channels for the wake-unschedulable alert."
  type        = list(string)
  default     = []
}
