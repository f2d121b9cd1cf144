# cocoon-hibernation on Google Cloud: four Cloud Run functions (2nd gen) built
# from one source archive, fed by Eventarc (Artifact Registry's `gcr` topic,
# GKE audit logs, a wake-request topic, a scheduled sweep topic).
#
# Invariants this module keeps (tests/deploy checks them statically):
# - every function runs as its own service account, and every trigger as its
#   own identity that may invoke only its function;
# - no primitive role, no allUsers/allAuthenticatedUsers anywhere;
# - release's and wake's triggers retry (RETRY_POLICY_RETRY): the functions
#   ack what cannot succeed and fail only what a retry can fix (docs/design.md#failure-semantics);
#   the sweep's does not (a tick is superseded by the next one).

locals {
  functions = toset(["release", "wake", "sweep", "ingest"])

  # Cloud Run service name == function name (gen2), used by IAM and Eventarc.
  function_names = { for f in local.functions : f => "${var.name_prefix}-${f}" }

  # Artifact Registry Docker host + path: the snapshot of VM v is BASE/v:hibernate.
  registry_base = "${var.artifact_registry.location}-docker.pkg.dev/${var.project_id}/${var.artifact_registry.repository_id}"

  kube_server = coalesce(var.kube_server_override, "https://${data.google_container_cluster.this.endpoint}")

  # The DNS-based control-plane endpoint (<id>.<location>.gke.goog) presents a
  # certificate from a public CA, not one signed by the cluster CA: pinning the
  # cluster CA there fails every TLS handshake. An empty COCOON_KUBE_CA makes
  # the functions trust the system roots (shared/config.py). Any other
  # endpoint (the IP endpoint, a private address) keeps the cluster CA.
  kube_server_is_dns_endpoint = var.kube_server_override != null && can(regex("^https://[a-z0-9.-]+\\.gke\\.goog(:[0-9]+)?(/.*)?$", coalesce(var.kube_server_override, "-")))
  kube_ca                     = local.kube_server_is_dns_endpoint ? "" : data.google_container_cluster.this.master_auth[0].cluster_ca_certificate

  labels = merge(var.labels, { "app" = "cocoon-hibernation" })

  # Every audit method is routed to both release and wake (docs/design.md#event-sources: both accept
  # audit CloudEvents, and any target may reconcile any set).
  shared_audit_routes = {
    for pair in setproduct(["release", "wake"], var.audit_methods) :
    "${pair[0]}:${pair[1]}" => { function = pair[0], method = pair[1], namespace = null }
  }

  # Pod status writes (kubelet, vk-cocoon, the scheduler) go to wake only: they
  # are what completes a wake (Running + the VM id annotation, Ready) and what
  # reports WakeNoCapacity (PodScheduled=False/Unschedulable). They are the
  # chattiest pod method, so with var.namespaces set each method gets one
  # trigger per namespace, narrowed by a resourceName path pattern.
  pod_status_routes = {
    for pair in setproduct(var.pod_status_audit_methods, length(var.namespaces) > 0 ? var.namespaces : [""]) :
    "wake:${pair[0]}${pair[1] == "" ? "" : ":${pair[1]}"}" => {
      function  = "wake"
      method    = pair[0]
      namespace = pair[1] == "" ? null : pair[1]
    }
  }

  audit_routes = merge(local.shared_audit_routes, local.pod_status_routes)

  # GKE writes status-subresource writes (pods/status for certain, custom
  # resources' /status as the same class of write) to the Data Access log as
  # DATA_WRITE, which is off unless enabled. Without it those triggers exist
  # but never fire, so the module turns DATA_WRITE on for
  # container.googleapis.com whenever it routes a status method.
  routes_status_writes   = anytrue([for r in values(local.audit_routes) : strcontains(r.method, ".status.")])
  manage_data_write_logs = var.gke_data_write_audit_logs && local.routes_status_writes

  apis = toset([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "container.googleapis.com",
    "eventarc.googleapis.com",
    # Service accounts and custom roles are created here; a fresh project may
    # not have the IAM API on yet.
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
  ])
}

# Authoritative for container.googleapis.com only: it replaces that service's
# audit config (DATA_READ/ADMIN_READ and exemptions set elsewhere for it), and
# leaves every other service's alone. Data Access logs are billed as log
# ingestion; pod status writes are frequent (every pod, every probe-driven
# condition change), see the module README for the estimate.
resource "google_project_iam_audit_config" "gke_data_write" {
  count = local.manage_data_write_logs ? 1 : 0

  project = var.project_id
  service = "container.googleapis.com"

  audit_log_config {
    log_type = "DATA_WRITE"
  }
}

data "google_project" "this" {
  project_id = var.project_id
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? local.apis : toset([])

  project = var.project_id
  service = each.value
  # Other workloads in the project may use these APIs too.
  disable_on_destroy = false
}

# Eventarc's service agent gets its role a few minutes after the API is first
# enabled; a trigger created before then fails with "Permission denied while
# using the Eventarc Service Agent" (hashicorp/terraform-provider-google#25294).
# Terraform cannot poll for that, so the first apply waits once, after the APIs
# and before anything that creates a trigger (functions and audit triggers).
# Re-applies do not wait: time_sleep only sleeps when it is created.
resource "time_sleep" "eventarc_agent" {
  create_duration = var.enable_apis ? var.eventarc_agent_wait : "0s"

  depends_on = [google_project_service.apis]
}

data "google_container_cluster" "this" {
  project  = var.project_id
  name     = var.gke_cluster.name
  location = var.gke_cluster.location
}

data "google_artifact_registry_repository" "snapshots" {
  project       = var.project_id
  location      = var.artifact_registry.location
  repository_id = var.artifact_registry.repository_id
}

# --- source ------------------------------------------------------------------

resource "google_storage_bucket" "source" {
  #checkov:skip=CKV_GCP_62:Access logs of a bucket holding only build inputs add cost without a reader; Cloud Audit Logs already record who changes it.
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name_prefix}-fn-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false
  labels                      = local.labels

  versioning {
    enabled = true
  }

  # Archives are content-addressed and only the current one is used: old
  # noncurrent versions are kept a while for rollback, then removed.
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 30
    }
    action {
      type = "Delete"
    }
  }
}

data "archive_file" "source" {
  type        = "zip"
  source_dir  = var.source_dir
  output_path = "${path.root}/.terraform/tmp/${var.name_prefix}-function-source.zip"
  excludes    = ["**/__pycache__/**", "**/*.pyc"]

  # Staged by infra/scripts/build-source.sh (infra/scripts/deploy.sh runs it
  # before every apply): without it the archive would be of nothing, or of a
  # directory that is not the product.
  lifecycle {
    precondition {
      condition     = fileexists("${var.source_dir}/main.py") && fileexists("${var.source_dir}/requirements.txt")
      error_message = "source_dir holds no staged source (main.py and requirements.txt): run ./infra/scripts/build-source.sh, or deploy with ./infra/scripts/deploy.sh, which stages it before every apply."
    }
  }
}

resource "google_storage_bucket_object" "source" {
  # The content hash in the name makes a code change redeploy the functions.
  name   = "cocoon-hibernation-${data.archive_file.source.output_md5}.zip"
  bucket = google_storage_bucket.source.name
  source = data.archive_file.source.output_path
}
