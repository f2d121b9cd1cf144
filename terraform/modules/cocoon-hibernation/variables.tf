# Inputs of the cocoon-hibernation module. Every variable validates what it can
# at plan time, so a typo fails `terraform plan`, not a function cold start.

variable "project_id" {
  description = "Google Cloud project that hosts the functions, topics and the Artifact Registry repository."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a Google Cloud project ID (6-30 lowercase letters, digits, hyphens)."
  }
}

variable "region" {
  description = "Region of the functions, the Pub/Sub-based triggers, the scheduler job and the source bucket."
  type        = string

  # Region numbers have more than one digit (europe-west10, europe-west12):
  # tests/deploy table-tests every location regex against real names.

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west1."
  }
}

variable "name_prefix" {
  description = "Prefix of every resource name. Functions become <prefix>-release, <prefix>-wake, <prefix>-sweep and <prefix>-ingest; service accounts <prefix>-<fn> and <prefix>-<fn>-trg, so it is kept short."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "cocoon"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,11}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 3-13 characters: lowercase letters, digits and hyphens, starting with a letter (service account IDs are limited to 30 characters)."
  }
}

variable "labels" {
  description = "Labels added to every labelled resource."
  type        = map(string)
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = {}
}

variable "enable_apis" {
  description = "Enable the Google APIs the module needs. Set false when the project's APIs are managed elsewhere. APIs are never disabled on destroy."
  type        = bool
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = true
}

# --- source ----------------------------------------------------------------

variable "source_dir" {
  description = "Directory staged by infra/scripts/build-source.sh (main.py, shared/, functions/, requirements.txt). Run the script before every apply."
  type        = string
}

# --- GKE ---------------------------------------------------------------------

variable "gke_cluster" {
  description = "The GKE cluster the functions manage: name and location (zone or region). Its endpoint and CA are read with a data source."
  type = object({
    name     = string
    location = string
  })

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$", var.gke_cluster.name))
    error_message = "gke_cluster.name must be a GKE cluster name (lowercase letters, digits, hyphens; at most 40 characters)."
  }
  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+(-[a-z])?$", var.gke_cluster.location))
    error_message = "gke_cluster.location must be a region (europe-west1) or a zone (europe-west1-b)."
  }
}

variable "kube_server_override" {
  description = "Cluster API URL to use instead of https://<cluster endpoint>, e.g. the DNS-based control-plane endpoint. Null uses the data source's endpoint."
  type        = string
  default     = null

  validation {
    condition     = var.kube_server_override == null || can(regex("^https://[^\\s/]+(/.*)?$", var.kube_server_override))
    error_message = "kube_server_override must be an https:// URL (the functions refuse plain HTTP to the API server)."
  }
}

variable "vpc_connector" {
  description = "Serverless VPC Access connector (projects/P/locations/R/connectors/C) for clusters with a private endpoint. Null sends traffic to the public endpoint directly."
  type        = string
  default     = null

  validation {
    condition     = var.vpc_connector == null || can(regex("^projects/[^/]+/locations/[^/]+/connectors/[^/]+$", var.vpc_connector))
    error_message = "vpc_connector must look like projects/P/locations/R/connectors/C."
  }
}

variable "namespaces" {
  description = "Namespaces the functions act in (COCOON_NAMESPACES). Empty = all namespaces. The Kubernetes writes are granted per namespace either way (kubernetes_rbac_manifest: each namespace listed here, or, when empty, each of rbac_namespaces); when set, the reads are too (a RoleBinding per namespace instead of the cluster-wide ClusterRoleBinding). When set, the pod-status audit triggers are narrowed to these namespaces (one trigger per method and namespace)."
  type        = list(string)
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = []

  validation {
    condition     = alltrue([for ns in var.namespaces : can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", ns))])
    error_message = "namespaces must be DNS-1123 labels."
  }
}

variable "audit_methods" {
  description = "GKE audit-log methodNames routed to release and wake (one Eventarc trigger per method and function). Writes to CocoonSets (reversed CRD group io.cocoonstack.cocoonset) and to pods. Pod status writes are routed to wake alone by pod_status_audit_methods. Reads are Data Access logs and deliberately absent."
  type        = list(string)
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default = [
    "io.cocoonstack.cocoonset.v1.cocoonsets.update",
    "io.cocoonstack.cocoonset.v1.cocoonsets.patch",
    # The operator reports hibernation progress in status; release's gate and
    # wake's phase checks react to it.
    "io.cocoonstack.cocoonset.v1.cocoonsets.status.update",
    "io.cocoonstack.cocoonset.v1.cocoonsets.status.patch",
    "io.k8s.core.v1.pods.update",
    "io.k8s.core.v1.pods.patch",
    "io.k8s.core.v1.pods.delete",
  ]

  validation {
    condition = length(var.audit_methods) > 0 && alltrue([
      for m in var.audit_methods :
      can(regex("^(io\\.cocoonstack\\.cocoonset\\.v1\\.cocoonsets|io\\.k8s\\.core\\.v1\\.pods)(\\.status)?\\.(create|update|patch|delete)$", m))
    ])
    error_message = "audit_methods must be write methods on cocoonsets or pods, optionally their status (io.cocoonstack.cocoonset.v1.cocoonsets[.status].VERB, io.k8s.core.v1.pods[.status].VERB)."
  }
}

variable "pod_status_audit_methods" {
  description = <<-EOT
    GKE audit-log methodNames of pod status writes, routed to wake only. A
    wake completes on status (the VM id annotation plus a Running container,
    then Ready, written by vk-cocoon and the kubelet) and WakeNoCapacity is a
    status write too (the scheduler's PodScheduled=False/Unschedulable).
    Status writes are the chattiest pod method: every pod in the cluster
    produces them, each one is an Eventarc delivery and a wake invocation
    (cheap: a pod that no CocoonSet owns is dropped). Set `namespaces` to
    narrow these triggers to those namespaces. With an empty list, completion
    and WakeNoCapacity wait for the next sweep (about a minute by default).
  EOT
  type        = list(string)
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default = [
    "io.k8s.core.v1.pods.status.patch",
    "io.k8s.core.v1.pods.status.update",
  ]

  validation {
    condition = alltrue([
      for m in var.pod_status_audit_methods :
      can(regex("^io\\.k8s\\.core\\.v1\\.pods\\.status\\.(update|patch)$", m))
    ])
    error_message = "pod_status_audit_methods may hold io.k8s.core.v1.pods.status.patch and io.k8s.core.v1.pods.status.update only."
  }
}

variable "gke_data_write_audit_logs" {
  description = <<-EOT
    Turn on DATA_WRITE Data Access audit logs for container.googleapis.com
    (google_project_iam_audit_config) while any routed audit method is a
    status write. GKE logs pod status writes as DATA_WRITE, off by default:
    without them the pod-status triggers never fire. The resource is
    authoritative for that one service (it replaces DATA_READ/ADMIN_READ or
    exemptions configured for it elsewhere). The logs are billed as ingestion
    into the _Default bucket beyond the free allotment: every pod status write
    in the cluster is one entry. Set false when audit configs are managed
    elsewhere (then enable DATA_WRITE there), or set
    pod_status_audit_methods = [] to do without them.
  EOT
  type        = bool
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = true
}

# --- first apply -------------------------------------------------------------

variable "eventarc_agent_wait" {
  description = "How long the first apply waits after enabling the APIs before creating functions and triggers, so Eventarc's service agent has its role (Go duration, e.g. 120s). Only when enable_apis is true; later applies never wait."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "120s"

  validation {
    condition     = can(regex("^[0-9]+(s|m)$", var.eventarc_agent_wait))
    error_message = "eventarc_agent_wait must be a whole number of seconds or minutes, like 120s or 3m."
  }
}

variable "log_metric_wait" {
  description = "How long to wait after creating the log-based metrics before creating the alert policy on them (Cloud Monitoring may take up to 10 minutes to see a new metric). Only when a metric is created."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "300s"

  validation {
    condition     = can(regex("^[0-9]+(s|m)$", var.log_metric_wait))
    error_message = "log_metric_wait must be a whole number of seconds or minutes, like 300s or 10m."
  }
}

# --- registry ----------------------------------------------------------------

variable "artifact_registry" {
  description = "The Docker-format Artifact Registry repository (in project_id) that holds the <vm>:hibernate snapshots. The registry base becomes LOCATION-docker.pkg.dev/PROJECT/REPOSITORY."
  type = object({
    location      = string
    repository_id = string
  })

  validation {
    condition     = can(regex("^(us|europe|asia|[a-z]+-[a-z]+[0-9]+)$", var.artifact_registry.location))
    error_message = "artifact_registry.location must be a region (asia-east1) or multi-region (asia, europe, us)."
  }
  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.artifact_registry.repository_id))
    error_message = "artifact_registry.repository_id must be a repository ID (lowercase letters, digits, hyphens)."
  }
}

# --- behaviour ---------------------------------------------------------------

variable "sweep_schedule" {
  description = "unix-cron schedule of the idle sweep / safety net (Cloud Scheduler). Every minute by default: it is what makes the system converge when events are lost."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "* * * * *"

  validation {
    condition     = length(split(" ", trimspace(var.sweep_schedule))) == 5
    error_message = "sweep_schedule must be a 5-field unix-cron expression."
  }
}

variable "sweep_time_zone" {
  description = "Time zone of sweep_schedule (tz database name)."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "Etc/UTC"
}

variable "wake_deadline" {
  description = "COCOON_WAKE_DEADLINE: age of a wake that earns a WakeTimedOut warning (e.g. 10m, 1h30m, 2d)."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "10m"

  # Exactly what shared/durations.parse_duration accepts, so a value that
  # passes plan cannot fail every function's cold start: whole numbers with a
  # unit (ms, s, m, h, d), concatenated, and a positive total (some digit is
  # not 0). No decimals, no signs, no blanks.
  validation {
    condition     = can(regex("^([0-9]+(ms|s|m|h|d))+$", var.wake_deadline)) && can(regex("[1-9]", var.wake_deadline))
    error_message = "wake_deadline must be a positive duration of whole numbers with units ms, s, m, h or d, like 90s, 10m, 1h30m or 2d (no decimals: write 1h30m, not 1.5h)."
  }
}

variable "seat_reclaim_grace" {
  description = "COCOON_SEAT_RECLAIM_GRACE: how long a wake must be unschedulable before it reclaims an idle reclaimable seat (e.g. 30s), or off."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "30s"

  # What shared/config.py accepts: `off`, or a duration as for wake_deadline.
  validation {
    condition     = var.seat_reclaim_grace == "off" || (can(regex("^([0-9]+(ms|s|m|h|d))+$", var.seat_reclaim_grace)) && can(regex("[1-9]", var.seat_reclaim_grace)))
    error_message = "seat_reclaim_grace must be off or a positive duration of whole numbers with units ms, s, m, h or d, like 30s or 2m."
  }
}

variable "cocoon_operator" {
  description = "COCOON_OPERATOR: present when a cocoon-operator manages the same CocoonSets (the functions then never act on a set generation it has not observed, docs/operator.md); absent when the functions act alone. Left present with no operator running, every release and wake waits (and logs why)."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "present"

  # What shared/config.py accepts (it also lowercases; plan insists on the canonical form).
  validation {
    condition     = contains(["present", "absent"], var.cocoon_operator)
    error_message = "cocoon_operator must be present or absent."
  }
}

variable "seat_order" {
  description = "COCOON_SEAT_ORDER: gate = restore pods wait in their pool's line behind a scheduling gate and a freed seat goes to the longest-waiting wake; off = the scheduler's own order."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "gate"

  validation {
    condition     = contains(["gate", "off"], var.seat_order)
    error_message = "seat_order must be gate or off."
  }
}

variable "sweep_max_suspends" {
  description = "COCOON_SWEEP_MAX_SUSPENDS: idle suspends per sweep run (keeps one run from stampeding the registry)."
  type        = number
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = 50

  validation {
    condition     = var.sweep_max_suspends >= 0 && floor(var.sweep_max_suspends) == var.sweep_max_suspends
    error_message = "sweep_max_suspends must be a whole number >= 0."
  }
}

variable "publish_lifecycle_events" {
  description = "Create a topic for the lifecycle CloudEvents (released, waking, woken, ...) and set COCOON_EVENTS_TOPIC."
  type        = bool
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = true
}

variable "max_instances" {
  description = "Upper bound on instances per function (a burst of audit events must not exhaust the API server)."
  type        = number
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = 10

  validation {
    condition     = var.max_instances >= 1 && var.max_instances <= 100
    error_message = "max_instances must be between 1 and 100."
  }
}

variable "dead_letter_retention" {
  description = "How long undeliverable events are kept on the dead-letter topics and their inspection subscriptions (Pub/Sub duration, at most 31 days)."
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "604800s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.dead_letter_retention)) && try(tonumber(trimsuffix(var.dead_letter_retention, "s")) >= 600 && tonumber(trimsuffix(var.dead_letter_retention, "s")) <= 2678400, false)
    error_message = "dead_letter_retention must be between 600s and 2678400s (31 days), written in seconds like 604800s."
  }
}

variable "dead_letter_max_delivery_attempts" {
  description = "Delivery attempts before an event goes to its dead-letter topic (applied by infra/scripts/attach-dead-letters.sh, see the module README)."
  type        = number
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = 20

  validation {
    condition     = var.dead_letter_max_delivery_attempts >= 5 && var.dead_letter_max_delivery_attempts <= 100
    error_message = "dead_letter_max_delivery_attempts must be between 5 and 100 (the Pub/Sub limits)."
  }
}

# --- ingest ------------------------------------------------------------------

variable "ingest_ingress" {
  description = <<-EOT
    Ingress of the HTTP `ingest` function. Default ALLOW_INTERNAL_ONLY: only
    traffic from the project's VPC (and Pub/Sub push) reaches it.
    ALLOW_INTERNAL_AND_GCLB adds an external HTTPS load balancer in front;
    ALLOW_ALL lets any network reach it. Whatever the ingress, the caller must
    ALSO pass Cloud Run IAM (an ID token of a principal in
    ingest_invoker_members) and then the app's bearer token: this module never
    grants allUsers. Registries that cannot mint Google ID tokens
    (Distribution, Harbor) use the in-cluster `cocoon-hibernation serve`
    deployment (infra/k8s/knative) instead.
  EOT
  type        = string
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = "ALLOW_INTERNAL_ONLY"

  validation {
    condition     = contains(["ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB", "ALLOW_ALL"], var.ingest_ingress)
    error_message = "ingest_ingress must be ALLOW_INTERNAL_ONLY, ALLOW_INTERNAL_AND_GCLB or ALLOW_ALL."
  }
}

variable "wake_publishers" {
  description = "Principals that may publish wake requests to the wake topic (roles/pubsub.publisher on that topic only), e.g. serviceAccount:portal@P.iam.gserviceaccount.com. Each can wake any set in the allowed namespaces; public members are rejected."
  type        = list(string)
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = []

  validation {
    condition = alltrue([
      for m in var.wake_publishers :
      can(regex("^(serviceAccount|user|group|domain|principal|principalSet):.+$", m))
    ])
    error_message = "wake_publishers must be IAM principals like serviceAccount:..., group:...; allUsers and allAuthenticatedUsers are not allowed."
  }
}

variable "ingest_invoker_members" {
  description = "Principals allowed to invoke `ingest` through Cloud Run IAM, e.g. serviceAccount:relay@P.iam.gserviceaccount.com (a relay or a Pub/Sub push identity). Public members are rejected: the webhook must never be unauthenticated at the IAM layer."
  type        = list(string)
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = []

  validation {
    condition = alltrue([
      for m in var.ingest_invoker_members :
      can(regex("^(serviceAccount|user|group|domain|principal|principalSet):.+$", m))
    ])
    error_message = "ingest_invoker_members must be IAM principals like serviceAccount:..., user:..., group:...; allUsers and allAuthenticatedUsers are not allowed."
  }
}

variable "ingest_push_service_accounts" {
  description = "Service-account emails whose Google OIDC tokens `ingest` accepts on /pubsub (COCOON_PUSH_SERVICE_ACCOUNTS): the oidc_token.service_account_email of each push subscription. Empty = OIDC push off (the static ingest token only)."
  type        = list(string)
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = []

  validation {
    condition     = alltrue([for e in var.ingest_push_service_accounts : can(regex("^[a-z0-9][a-z0-9._+-]*@[a-z0-9][a-z0-9.-]*\\.gserviceaccount\\.com$", lower(e)))])
    error_message = "ingest_push_service_accounts must be service-account emails (…@….gserviceaccount.com), never a person's account."
  }
}

# --- alerting ----------------------------------------------------------------

variable "alert_notification_channels" {
  description = "Monitoring notification channel IDs (projects/P/notificationChannels/N) for the alerts (docs/runbook.md). Empty = an incident is only visible in the console."
  type        = list(string)
  # null from a caller (the example passes its unset inputs through) means the default.
  nullable = false
  default  = []

  validation {
    condition     = alltrue([for c in var.alert_notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "alert_notification_channels must be full channel IDs: projects/P/notificationChannels/N."
  }
}

# --- Kubernetes RBAC -----------------------------------------------------------

variable "rbac_namespaces" {
  description = "Namespaces, besides `namespaces`, that get the writer RoleBinding in the kubernetes_rbac_manifest output. Needed only when `namespaces` is empty (all namespaces): list there every namespace that holds CocoonSets; a set elsewhere is read but its first write answers 403."
  type        = list(string)
  nullable    = false
  default     = []

  validation {
    condition     = alltrue([for ns in var.rbac_namespaces : can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", ns))])
    error_message = "rbac_namespaces must be DNS-1123 labels."
  }
}

variable "kubernetes_token_review" {
  description = "Bind ClusterRole cocoon-hibernation-tokenreview (infra/k8s/rbac.yaml) to the functions in kubernetes_rbac_manifest. Needed only when they verify in-cluster callers by TokenReview (COCOON_CLUSTER_CALLERS, docs/security.md)."
  type        = bool
  nullable    = false
  default     = false
}

# --- after the apply ------------------------------------------------------------

variable "attach_dead_letters" {
  description = "Run infra/scripts/attach-dead-letters.sh from the apply (terraform_data + local-exec) on every subscription Eventarc created: the dead-letter topic and an ack deadline covering the function's timeout (Eventarc's default is 10 s, so a slower delivery is redelivered while it still runs). Needs gcloud and jq where Terraform runs. false = run the script by hand after every apply that creates a trigger."
  type        = bool
  nullable    = false
  default     = true
}

variable "alert_stuck_suspending_after" {
  description = "How long a CocoonSet may stay suspended but not yet Suspended (the release waiting for its snapshot) before the stuck-Suspending alert fires (seconds, e.g. 1800s)."
  type        = string
  nullable    = false
  default     = "1800s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.alert_stuck_suspending_after)) && try(tonumber(trimsuffix(var.alert_stuck_suspending_after, "s")) >= 600 && tonumber(trimsuffix(var.alert_stuck_suspending_after, "s")) <= 86400, false)
    error_message = "alert_stuck_suspending_after must be between 600s and 86400s, written in seconds like 1800s."
  }
}

variable "alert_function_errors" {
  description = "5xx answers of one function within 10 minutes above which the error alert fires. A few are expected (a redelivered event after an API server restart)."
  type        = number
  nullable    = false
  default     = 10

  validation {
    condition     = var.alert_function_errors >= 0 && floor(var.alert_function_errors) == var.alert_function_errors
    error_message = "alert_function_errors must be a whole number >= 0."
  }
}
