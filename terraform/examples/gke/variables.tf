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
  description = "Notification channels for the alerts (docs/runbook.md)."
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

variable "wake_publishers" {
  description = "Principals that may publish to the wake topic (serviceAccount:..., never allUsers)."
  type        = list(string)
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

variable "labels" {
  description = "Extra labels on every labelled resource (env is added from `environment`)."
  type        = map(string)
  default     = {}
}

variable "enable_apis" {
  description = "Enable the Google APIs the module needs; false when they are managed elsewhere."
  type        = bool
  default     = null
}

variable "audit_methods" {
  description = "GKE audit-log methods routed to release and wake (the module's default covers CocoonSet and pod writes)."
  type        = list(string)
  default     = null
}

variable "sweep_time_zone" {
  description = "Time zone of sweep_schedule (tz database name, Etc/UTC by default)."
  type        = string
  default     = null
}

variable "seat_reclaim_grace" {
  description = "How long a wake waits Unschedulable before it reclaims an idle reclaimable seat (30s by default), or off."
  type        = string
  default     = null
}

variable "cocoon_operator" {
  description = "present (a cocoon-operator manages the same sets, the default) or absent (the functions act alone)."
  type        = string
  default     = null
}

variable "seat_order" {
  description = "gate (freed seats go to the longest-waiting wake, the default) or off (the scheduler's own order)."
  type        = string
  default     = null
}

variable "sweep_max_suspends" {
  description = "Idle suspends per sweep run (50 by default)."
  type        = number
  default     = null
}

variable "publish_lifecycle_events" {
  description = "Create the lifecycle CloudEvents topic and publish to it (true by default)."
  type        = bool
  default     = null
}

variable "max_instances" {
  description = "Upper bound on instances per function (10 by default)."
  type        = number
  default     = null
}

variable "dead_letter_retention" {
  description = "Retention of the dead-letter topics and subscriptions (604800s by default)."
  type        = string
  default     = null
}

variable "dead_letter_max_delivery_attempts" {
  description = "Delivery attempts before an event is dead-lettered (20 by default)."
  type        = number
  default     = null
}

variable "attach_dead_letters" {
  description = "Attach dead letters and ack deadlines from the apply (needs gcloud and jq); false to run attach-dead-letters.sh by hand."
  type        = bool
  default     = null
}

variable "rbac_namespaces" {
  description = "With namespaces empty: the namespaces holding CocoonSets, for the writer RoleBindings of kubernetes_rbac_manifest."
  type        = list(string)
  default     = null
}

variable "kubernetes_token_review" {
  description = "Bind the TokenReview ClusterRole to the functions in kubernetes_rbac_manifest (for COCOON_CLUSTER_CALLERS)."
  type        = bool
  default     = null
}

variable "alert_stuck_suspending_after" {
  description = "How long a set may stay Suspending before the alert (1800s by default)."
  type        = string
  default     = null
}

variable "alert_function_errors" {
  description = "5xx answers per function in 10 minutes above which the error alert fires (10 by default)."
  type        = number
  default     = null
}
