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

# --- optional: null = the module's default (see its README) -------------------

variable "pod_status_audit_methods" {
  description = "Pod status writes routed to wake; [] drops them and wakes complete on the next sweep tick."
  type        = list(string)
  default     = null
}

variable "gke_data_write_audit_logs" {
  description = "Let the module turn on GKE DATA_WRITE audit logs (needed by the pod-status triggers; billed). false when audit configs are managed elsewhere."
  type        = bool
  default     = null
}

variable "wake_deadline" {
  description = "Age of a wake that earns a WakeTimedOut warning (whole-number durations: 90s, 10m, 1h30m, 2d)."
  type        = string
  default     = null
}

variable "sweep_schedule" {
  description = "unix-cron schedule of the sweep (every minute by default)."
  type        = string
  default     = null
}

variable "kube_server_override" {
  description = "Private or DNS-based control-plane endpoint (https://...) instead of the cluster's public endpoint."
  type        = string
  default     = null
}

variable "vpc_connector" {
  description = "Serverless VPC Access connector (projects/P/locations/R/connectors/C) for a private control plane."
  type        = string
  default     = null
}

variable "ingest_ingress" {
  description = "Ingress of the ingest function (ALLOW_INTERNAL_ONLY by default)."
  type        = string
  default     = null
}

variable "ingest_invoker_members" {
  description = "Principals allowed to invoke ingest (serviceAccount:..., never allUsers)."
  type        = list(string)
  default     = null
}

variable "ingest_push_service_accounts" {
  description = "Service accounts whose Pub/Sub OIDC push ingest accepts on /pubsub."
  type        = list(string)
  default     = null
}

variable "eventarc_agent_wait" {
  description = "First apply: wait after enabling the APIs, before creating triggers (e.g. 120s)."
  type        = string
  default     = null
}

variable "log_metric_wait" {
  description = "Wait after creating the log metrics, before the alert policy on them (e.g. 300s)."
  type        = string
  default     = null
}
