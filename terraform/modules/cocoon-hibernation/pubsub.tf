# Topics the module owns: wake requests, sweep ticks, lifecycle events, and a
# dead-letter topic per retried CloudEvent function (release and wake; a sweep
# tick is never retried, so it has nothing to dead-letter). Google-managed encryption keys
# (see the skips): the messages are set references and timestamps, no secrets.

resource "google_pubsub_topic" "wake_requests" {
  #checkov:skip=CKV_GCP_83:Messages are {"namespace","name"} set references; Google-managed encryption is sufficient and CMEK would add a key dependency to every publisher.
  project = var.project_id
  name    = "${var.name_prefix}-wake-requests"
  labels  = local.labels
  # A wake request older than a day is stale: the user has retried or given up.
  message_retention_duration = "86400s"
  depends_on                 = [google_project_service.apis]
}

resource "google_pubsub_topic" "sweep" {
  #checkov:skip=CKV_GCP_83:Carries only the scheduler's {"dryRun": false} tick.
  project = var.project_id
  name    = "${var.name_prefix}-sweep"
  labels  = local.labels
  # Ticks are worthless once the next one is due; keep them briefly.
  message_retention_duration = "600s"
  depends_on                 = [google_project_service.apis]
}

resource "google_pubsub_topic" "events" {
  #checkov:skip=CKV_GCP_83:Lifecycle CloudEvents (released, woken, ...) name sets and phases only.
  count = var.publish_lifecycle_events ? 1 : 0

  project                    = var.project_id
  name                       = "${var.name_prefix}-events"
  labels                     = local.labels
  message_retention_duration = "86400s"
  depends_on                 = [google_project_service.apis]
}

resource "google_cloud_scheduler_job" "sweep" {
  project     = var.project_id
  region      = var.region
  name        = "${var.name_prefix}-sweep"
  description = "Idle sweep and safety net of cocoon-hibernation (docs/design.md#sweep)."
  schedule    = var.sweep_schedule
  time_zone   = var.sweep_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.sweep.id
    # The canonical io.cocoonstack.sweep.requested data (functions/sweep.py; docs/design.md#sweep).
    data = base64encode(jsonencode({ dryRun = false }))
  }

  depends_on = [google_project_service.apis]
}

# --- dead letters ----------------------------------------------------------------

resource "google_pubsub_topic" "dead_letter" {
  #checkov:skip=CKV_GCP_83:Dead letters are copies of the event payloads above (set references, registry paths); Google-managed encryption is sufficient.
  for_each = local.retried_functions

  project = var.project_id
  name    = "${var.name_prefix}-${each.key}-dead-letter"
  labels  = local.labels
  # Bounded: a dead letter is for triage, not an archive. Topic retention
  # keeps them even before anyone subscribes.
  message_retention_duration = var.dead_letter_retention
  depends_on                 = [google_project_service.apis]
}

# A pull subscription per dead-letter topic, so the letters can be read
# (`gcloud pubsub subscriptions pull ...`) and replayed.
resource "google_pubsub_subscription" "dead_letter" {
  for_each = local.retried_functions

  project                    = var.project_id
  name                       = "${var.name_prefix}-${each.key}-dead-letter"
  topic                      = google_pubsub_topic.dead_letter[each.key].id
  labels                     = local.labels
  message_retention_duration = var.dead_letter_retention
  retain_acked_messages      = false
  ack_deadline_seconds       = 60

  expiration_policy {
    ttl = "" # never expire for inactivity: nobody reads it until something breaks
  }
}

# Pub/Sub forwards undeliverable messages as its service agent.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  for_each = local.retried_functions

  project = var.project_id
  topic   = google_pubsub_topic.dead_letter[each.key].name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}
