# The four targets of main.py (docs/design.md#overview), one Cloud Run function each, all
# from the same source archive. Environment per docs/configuration.md; `Settings.from_env`
# (shared/config.py) is the code side and tests/deploy checks they agree.

data "google_pubsub_topic" "gcr" {
  # Artifact Registry publishes to `gcr` in its own project; enabling the API
  # usually creates it. Creating it here would 409 where it exists: when it is
  # missing, create it once (`gcloud pubsub topics create gcr`) and re-apply.
  project = var.project_id
  name    = "gcr"
}

locals {
  env_common = {
    COCOON_KUBE_AUTH          = "google"
    COCOON_KUBE_SERVER        = local.kube_server
    COCOON_KUBE_CA            = local.kube_ca
    COCOON_REGISTRY_BASE      = local.registry_base
    COCOON_REGISTRY_INSECURE  = "false"
    COCOON_REGISTRY_AUTH      = "google"
    COCOON_NAMESPACES         = join(",", var.namespaces)
    COCOON_EVENTS_TOPIC       = var.publish_lifecycle_events ? google_pubsub_topic.events[0].id : ""
    COCOON_WAKE_DEADLINE      = var.wake_deadline
    COCOON_SWEEP_MAX_SUSPENDS = tostring(var.sweep_max_suspends)
    COCOON_SEAT_RECLAIM_GRACE = var.seat_reclaim_grace
    COCOON_SEAT_ORDER         = var.seat_order
    COCOON_OPERATOR           = var.cocoon_operator
    COCOON_LOG_FORMAT         = "json"
  }

  # Pub/Sub OIDC push to ingest carries a Google ID token whose audience is
  # the service's run.app URL, which is deterministic: no self-reference.
  ingest_push_audience = "https://${local.function_names["ingest"]}-${data.google_project.this.number}.${var.region}.run.app"

  env_ingest = {
    # Anyone with a Google account can mint a token for that guessable
    # audience: OIDC push is on only with an allowlist of callers, and the
    # app refuses an audience without one (shared/config.py).
    COCOON_PUSH_AUDIENCE         = length(var.ingest_push_service_accounts) > 0 ? local.ingest_push_audience : ""
    COCOON_PUSH_SERVICE_ACCOUNTS = join(",", var.ingest_push_service_accounts)
  }

  # entry_point = the decorated function in main.py; trigger_topic = the
  # function's own Eventarc (Pub/Sub) trigger, null for the HTTP target.
  # retry_policy: the CF2 API defaults to dropping failed deliveries
  # (EventTrigger.retryPolicy is RETRY_POLICY_DO_NOT_RETRY unless set), so release and wake ask for retries explicitly.
  function_specs = {
    release = {
      entry_point     = "release"
      timeout_seconds = 300
      trigger_topic   = data.google_pubsub_topic.gcr.id
      retry_policy    = "RETRY_POLICY_RETRY"
      env             = local.env_common
    }
    wake = {
      entry_point     = "wake"
      timeout_seconds = 300
      trigger_topic   = google_pubsub_topic.wake_requests.id
      retry_policy    = "RETRY_POLICY_RETRY"
      env             = local.env_common
    }
    sweep = {
      entry_point = "sweep"
      # A sweep pages through every set; give it the event-function maximum.
      timeout_seconds = 540
      trigger_topic   = google_pubsub_topic.sweep.id
      # A tick is superseded by the next one a minute later: retrying a failed
      # tick (for up to 24 h, with backoff) would only pile runs on top of the
      # schedule. The next tick converges from live state instead.
      retry_policy = "RETRY_POLICY_DO_NOT_RETRY"
      env          = local.env_common
    }
    ingest = {
      entry_point     = "ingest"
      timeout_seconds = 60
      trigger_topic   = null
      retry_policy    = null
      env             = merge(local.env_common, local.env_ingest)
    }
  }
}

locals {
  # Eventarc-created subscriptions default to a 10 s ack deadline: a delivery
  # still running after that is redelivered, and a second instance starts the
  # same work. The deadline covers the function's timeout (Pub/Sub allows up
  # to 600 s); attach-dead-letters.sh sets it with the dead-letter policy.
  ack_deadline_seconds = { for k, spec in local.function_specs : k => min(600, spec.timeout_seconds) }
}

resource "google_cloudfunctions2_function" "fn" {
  for_each = local.function_specs

  project     = var.project_id
  name        = local.function_names[each.key]
  location    = var.region
  description = "cocoon-hibernation ${each.key} (docs/production.md)"
  labels      = local.labels

  build_config {
    runtime     = "python312"
    entry_point = each.value.entry_point
    # Projects created since mid-2024 build with a default account that may
    # hold no rights at all; this one holds exactly what a build needs (iam.tf).
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    service_account_email          = google_service_account.runtime[each.key].email
    available_memory               = "512Mi"
    timeout_seconds                = each.value.timeout_seconds
    min_instance_count             = 0
    max_instance_count             = var.max_instances
    all_traffic_on_latest_revision = true
    # Eventarc delivers over Google's network, so the CloudEvent functions take
    # internal traffic only; ingest's ingress is a choice (see its variable).
    ingress_settings              = each.key == "ingest" ? var.ingest_ingress : "ALLOW_INTERNAL_ONLY"
    vpc_connector                 = var.vpc_connector
    vpc_connector_egress_settings = var.vpc_connector == null ? null : "PRIVATE_RANGES_ONLY"
    environment_variables         = each.value.env

    dynamic "secret_environment_variables" {
      for_each = each.key == "ingest" ? [google_secret_manager_secret.ingest_token.secret_id] : []
      content {
        key        = "COCOON_INGEST_TOKEN"
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = "latest"
      }
    }
  }

  dynamic "event_trigger" {
    for_each = each.value.trigger_topic == null ? [] : [each.value.trigger_topic]
    content {
      # Pub/Sub-based triggers are regional only (Eventarc).
      trigger_region        = var.region
      event_type            = "google.cloud.pubsub.topic.v1.messagePublished"
      pubsub_topic          = event_trigger.value
      service_account_email = google_service_account.trigger[each.key].email
      retry_policy          = each.value.retry_policy
    }
  }

  depends_on = [
    google_project_service.apis,
    time_sleep.eventarc_agent,
    google_project_iam_member.build,
    google_project_iam_member.build_image_writer,
    google_storage_bucket_iam_member.build_source_reader,
    google_secret_manager_secret_version.ingest_token,
    google_secret_manager_secret_iam_member.ingest_token,
  ]
}
