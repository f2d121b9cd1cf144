# epoch's bucket -> release (opt-in: var.epoch_bucket). epoch, cocoonstack's
# registry, sends no notifications; it stores each tag as the object
# <prefix>manifests/<repo>/<tag>.json (its registry/registry.go
# PushManifestJSON), so the bucket's object-finalize event is its push event.
# The function drops every other object (digests, catalog, blobs, other tags)
# before building a client (shared/adapters/epoch.py). docs/epoch.md.
#
# Like the audit triggers: Eventarc retries by default (Pub/Sub backoff), and
# the trigger identity is release's own.

locals {
  epoch_enabled = var.epoch_bucket != null
}

# Cloud Storage publishes its notifications as its own service agent: Eventarc's
# storage triggers need it to be allowed to publish to the (Eventarc-owned) topic.
data "google_storage_project_service_account" "gcs" {
  count   = local.epoch_enabled ? 1 : 0
  project = var.project_id
}

resource "google_project_iam_member" "gcs_agent_publisher" {
  count   = local.epoch_enabled ? 1 : 0
  project = var.project_id
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${data.google_storage_project_service_account.gcs[0].email_address}"
}

resource "google_eventarc_trigger" "epoch_finalized" {
  count = local.epoch_enabled ? 1 : 0

  project = var.project_id
  # A storage trigger lives where its bucket does (a region or a multi-region).
  location        = lower(var.epoch_bucket.location)
  name            = "${var.name_prefix}-release-epoch"
  service_account = google_service_account.trigger["release"].email
  labels          = local.labels

  matching_criteria {
    attribute = "type"
    value     = "google.cloud.storage.object.v1.finalized"
  }
  matching_criteria {
    attribute = "bucket"
    value     = var.epoch_bucket.name
  }

  destination {
    cloud_run_service {
      service = local.function_names["release"]
      region  = var.region
    }
  }

  depends_on = [
    google_cloudfunctions2_function.fn,
    google_project_iam_member.event_receiver,
    google_project_iam_member.gcs_agent_publisher,
    google_cloud_run_service_iam_member.trigger_invoker,
    time_sleep.eventarc_agent,
  ]
}
