# Identities and the least each needs.
#
# Runtime (one per function): what the function's code calls.
#   all          container.clusterViewer (project; container.clusters.get is all
#                it grants; the Kubernetes verbs come from infra/k8s/rbac.yaml:
#                cluster-wide reads via gke-binding.yaml, writes per namespace
#                via namespace-binding.yaml, both naming these emails)
#   all          artifactregistry.repoAdmin on the snapshot repository only:
#                the least predefined role with artifactregistry.tags.delete
#                and versions.delete (writer has neither). The CloudEvent
#                targets share one level-triggered reconciler and any of them
#                may reconcile any set (SPEC §11): every GKE pod write reaches
#                release as well as wake, so release, too, runs the wake's
#                completion step (delete the :hibernate manifest once the VM
#                is live, SPEC §5), as do sweep's safety net and ingest's audit
#                path. Release's own path still never deletes a tag (SPEC §4);
#                the grant exists so a wake finished on release's instance does
#                not end in a 403 and an Eventarc retry cycle.
#   ingest       secretmanager.secretAccessor on the ingest-token secret only
#   all          pubsub.publisher on the lifecycle-events topic only (when enabled)
# Trigger (one per CloudEvent function): run.invoker on its own function only,
#   eventarc.eventReceiver for the audit-log triggers (project scope is the
#   only scope the role has).

locals {
  trigger_functions = toset(["release", "wake", "sweep"])
  audit_functions   = toset(["release", "wake"])
  # Every function runs the shared reconciler (see above).
  deleter_functions = toset(["release", "wake", "sweep", "ingest"])
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

resource "google_artifact_registry_repository_iam_member" "tag_deleter" {
  for_each = local.deleter_functions

  project    = var.project_id
  location   = data.google_artifact_registry_repository.snapshots.location
  repository = data.google_artifact_registry_repository.snapshots.repository_id
  role       = "roles/artifactregistry.repoAdmin"
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

# --- ingest callers ------------------------------------------------------------

resource "google_cloud_run_service_iam_member" "ingest_invoker" {
  for_each = toset(var.ingest_invoker_members)

  project  = var.project_id
  location = var.region
  service  = google_cloudfunctions2_function.fn["ingest"].name
  role     = "roles/run.invoker"
  member   = each.value
}
