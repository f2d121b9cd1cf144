# Identities and the least each needs.
#
# Runtime (one per function): what the function's code calls.
#   all          container.clusterViewer (project; container.clusters.get is all
#                it grants; the Kubernetes verbs come from infra/k8s/rbac.yaml:
#                cluster-wide reads via gke-binding.yaml, writes per namespace
#                via namespace-binding.yaml, both naming these emails)
#   all          a custom role on the snapshot repository only, holding what
#                shared/clients/registry.py does and nothing else: manifest
#                HEAD/GET and tag listing through the Docker API
#                (repositories.downloadArtifacts, tags.list) and the manifest
#                DELETE by digest (versions.delete, with tags.delete for the
#                tag that goes with it). No upload, no package delete, no
#                repository settings (repoAdmin had all three). The CloudEvent
#                targets share one level-triggered reconciler and any of them
#                may reconcile any set (docs/design.md#overview): every GKE pod write reaches
#                release as well as wake, so release, too, runs the wake's
#                completion step (delete the :hibernate manifest once the VM
#                is live, docs/design.md#wake), as do sweep's safety net and ingest's audit
#                path. Release's own path still never deletes a tag (docs/design.md#release).
#   ingest       secretmanager.secretAccessor on the ingest-token secret only
#   all          pubsub.publisher on the lifecycle-events topic only (when enabled)
# Trigger (one per CloudEvent function): run.invoker on its own function only,
#   eventarc.eventReceiver for the audit-log triggers (project scope is the
#   only scope the role has).
# Build (one for the four functions): what Cloud Build needs to turn the
#   source archive into an image, and no more (see below).

locals {
  trigger_functions = toset(["release", "wake", "sweep"])
  # Functions whose triggers retry (RETRY_POLICY_RETRY and the audit-log
  # triggers): only these get dead-letter topics.
  retried_functions = toset(["release", "wake"])
  audit_functions   = toset(["release", "wake"])
  # Every function runs the shared reconciler (see above).
  deleter_functions = toset(["release", "wake", "sweep", "ingest"])

  snapshot_permissions = [
    "artifactregistry.repositories.downloadArtifacts",
    "artifactregistry.tags.list",
    "artifactregistry.tags.delete",
    "artifactregistry.versions.delete",
  ]

  # Where a Cloud Run functions build pushes its image: the gcf-artifacts
  # repository Cloud Functions creates on first deploy, in the functions'
  # region. It does not exist before the first build, so the writer grant is
  # a project binding with a condition naming it, never the snapshot
  # repository (the build must not be able to overwrite a snapshot).
  build_repository = "projects/${var.project_id}/locations/${var.region}/repositories/gcf-artifacts"
}

resource "google_service_account" "runtime" {
  for_each = local.functions

  project      = var.project_id
  account_id   = "${var.name_prefix}-${each.key}"
  display_name = "cocoon-hibernation ${each.key} (runtime)"
  description  = "Runs the ${each.key} function; a Kubernetes User in infra/k8s/gke-binding.yaml and namespace-binding.yaml."
}

resource "google_service_account" "trigger" {
  for_each = local.trigger_functions

  project      = var.project_id
  account_id   = "${var.name_prefix}-${each.key}-trg"
  display_name = "cocoon-hibernation ${each.key} (Eventarc trigger)"
  description  = "Identity Eventarc uses to deliver events to the ${each.key} function."
}

# --- runtime -----------------------------------------------------------------

resource "google_project_iam_member" "cluster_viewer" {
  for_each = local.functions

  project = var.project_id
  role    = "roles/container.clusterViewer"
  member  = "serviceAccount:${google_service_account.runtime[each.key].email}"
}

resource "google_project_iam_custom_role" "snapshot_manager" {
  project     = var.project_id
  role_id     = "${replace(var.name_prefix, "-", "_")}_snapshot_manager"
  title       = "cocoon-hibernation snapshot manager (${var.name_prefix})"
  description = "Read, list and delete <vm>:hibernate manifests; granted on the snapshot repository only."
  permissions = local.snapshot_permissions
}

resource "google_artifact_registry_repository_iam_member" "tag_deleter" {
  for_each = local.deleter_functions

  project    = var.project_id
  location   = data.google_artifact_registry_repository.snapshots.location
  repository = data.google_artifact_registry_repository.snapshots.repository_id
  role       = google_project_iam_custom_role.snapshot_manager.id
  member     = "serviceAccount:${google_service_account.runtime[each.key].email}"
}

resource "google_pubsub_topic_iam_member" "events_publisher" {
  for_each = var.publish_lifecycle_events ? local.functions : toset([])

  project = var.project_id
  topic   = google_pubsub_topic.events[0].name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.runtime[each.key].email}"
}

resource "google_secret_manager_secret_iam_member" "ingest_token" {
  project   = var.project_id
  secret_id = google_secret_manager_secret.ingest_token.secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.runtime["ingest"].email}"
}

# --- triggers ----------------------------------------------------------------

resource "google_cloud_run_service_iam_member" "trigger_invoker" {
  for_each = local.trigger_functions

  project  = var.project_id
  location = var.region
  service  = google_cloudfunctions2_function.fn[each.key].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.trigger[each.key].email}"
}

resource "google_project_iam_member" "event_receiver" {
  for_each = local.audit_functions

  project = var.project_id
  role    = "roles/eventarc.eventReceiver"
  member  = "serviceAccount:${google_service_account.trigger[each.key].email}"
}

# Pub/Sub mints the OIDC tokens Eventarc's push carries. Projects created
# before 2021-04-08 need this grant; it is scoped to the trigger identities.
resource "google_service_account_iam_member" "pubsub_token_creator" {
  for_each = local.trigger_functions

  service_account_id = google_service_account.trigger[each.key].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

# --- who may wake ----------------------------------------------------------------

# Publishing to the wake topic wakes any set in COCOON_NAMESPACES (the `wake`
# function trusts what Eventarc delivers): only the named principals get
# pubsub.publisher on it. A principal with project-wide pubsub.publisher can
# still publish; docs/security.md says to keep that role off the project.
resource "google_pubsub_topic_iam_member" "wake_publisher" {
  for_each = toset(var.wake_publishers)

  project = var.project_id
  topic   = google_pubsub_topic.wake_requests.name
  role    = "roles/pubsub.publisher"
  member  = each.value
}

# --- ingest callers ------------------------------------------------------------

resource "google_cloud_run_service_iam_member" "ingest_invoker" {
  for_each = toset(var.ingest_invoker_members)

  project  = var.project_id
  location = var.region
  service  = google_cloudfunctions2_function.fn["ingest"].name
  role     = "roles/run.invoker"
  member   = each.value
}

# --- build ---------------------------------------------------------------------

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name_prefix}-build"
  display_name = "cocoon-hibernation (function builds)"
  description  = "Cloud Build identity for the cocoon-hibernation functions."
}

# A build writes its logs (project is the only scope of that role), pushes
# the image (below) and reads the source archive (bucket grant below).
resource "google_project_iam_member" "build" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = "serviceAccount:${google_service_account.build.email}"
}

resource "google_project_iam_member" "build_image_writer" {
  project = var.project_id
  role    = "roles/artifactregistry.writer"
  member  = "serviceAccount:${google_service_account.build.email}"

  condition {
    title       = "gcf-artifacts only"
    description = "Function images only; never the snapshot repository."
    expression  = "resource.name.startsWith(\"${local.build_repository}\")"
  }
}

resource "google_storage_bucket_iam_member" "build_source_reader" {
  bucket = google_storage_bucket.source.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.build.email}"
}

# Cloud Functions submits the build as the account above: the deployer (the
# identity running Terraform) must be allowed to act as it. That is the
# deployer's own iam.serviceAccountUser, not something this module grants.
