# The functions' metrics, rebuilt from their structured logs (shared/log.py):
#   counter      {"metric": NAME, "value": N, "labels": {...}}   one entry per increment
#   histogram    {"metric": NAME, "value": SECONDS, "kind": "histogram", "labels": {...}}
# A counter is a DELTA/INT64 log metric counting matching entries; a histogram
# a DELTA/DISTRIBUTION log metric extracting `value`. The names, labels and
# buckets are functions/metrics.py's catalogue (the same list `serve` exposes
# on /metrics); tests/deploy holds the two equal. Dashboards and alerts below
# read only these and Google's own metrics. docs/observability.md lists them.

locals {
  log_metrics = {
    cocoon_operator_slot_release_pods_deleted_total = {
      description = "Pods deleted to release a suspended CocoonSet's seat."
      labels      = ["namespace", "cocoonset"]
    }
    cocoon_operator_slot_release_wake_total = {
      description = "Completed wakes of released CocoonSets, by placement (hint-node or pool)."
      labels      = ["namespace", "cocoonset", "placement"]
    }
    cocoon_operator_slot_release_wake_unschedulable_total = {
      description = "Wake attempts whose main pod was Unschedulable (no seat free)."
      labels      = ["namespace", "cocoonset"]
    }
    # The seat economy's own counter (not the reference operator's): idle seats
    # taken for waiting wakes, by the victim's namespace and the seat's pool.
    cocoon_hibernation_seat_reclaims_total = {
      description = "Idle reclaimable seats taken for a waiting wake (victim namespace, pool)."
      labels      = ["namespace", "pool"]
    }
    cocoon_hibernation_events_total = {
      description = "Kubernetes Events created on CocoonSets, by reason (WakeNoCapacity, WakeTimedOut, WriteRefused, ...) and type."
      labels      = ["namespace", "reason", "type"]
    }
    cocoon_hibernation_release_pending_total = {
      description = "Sweep runs that found a suspended release set not yet Suspended and reconciled it (a set stuck in Suspending counts every run)."
      labels      = ["namespace", "cocoonset"]
    }
    cocoon_hibernation_dropped_events_total = {
      description = "Incoming events dropped without a reconcile, by target and reason (not ours, malformed, filtered)."
      labels      = ["target", "reason"]
    }
    # Writes refused by admission (a plugin, or cocoon-webhook's POD_CREATORS or
    # CocoonSet rules): one per refusal situation, with its WriteRefused Warning.
    cocoon_hibernation_admission_refused_total = {
      description = "Writes refused by admission (quota, PodSecurity, cocoon-webhook), once per situation."
      labels      = ["namespace", "cocoonset", "write", "webhook"]
    }
    cocoon_hibernation_retries_total = {
      description = "Deliberate retries (a compare-and-swap conflict re-read, a redelivery asked of the platform), by operation."
      labels      = ["operation"]
    }
  }

  # Seconds. Buckets cover a seat freed in seconds up to a wake waiting an hour.
  log_distributions = {
    cocoon_hibernation_wake_seconds = {
      description = "From the wake request (wake-started) to the restored VM up (WakeCompleted)."
      labels      = ["namespace", "placement"]
    }
    cocoon_hibernation_seat_wait_seconds = {
      description = "Time a wake's main pod waited Unschedulable for a seat before it was scheduled."
      labels      = ["namespace"]
    }
    cocoon_hibernation_reclaim_grace_seconds = {
      description = "Time a wake had waited when an idle seat was reclaimed for it."
      labels      = ["pool"]
    }
    cocoon_hibernation_sweep_seconds = {
      description = "Duration of one sweep run."
      labels      = ["dry_run"]
    }
    # Observed only where the report's time is known (source=push: the push's
    # wait watched it land; audit: the audit event of vk-cocoon's patch); a
    # release by the sweep is not a sample (docs/observability.md).
    cocoon_hibernation_seat_freed_seconds = {
      description = "From vk-cocoon's hibernated report to the main pod's DELETE, where the report time is known (source push or audit)."
      labels      = ["namespace", "source"]
    }
  }
  histogram_buckets = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600]
  # A metric's own buckets (shared/metric_names.py `own_buckets`); the others use histogram_buckets.
  distribution_buckets = {
    cocoon_hibernation_seat_freed_seconds = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
  }

  services_regex = "^${var.name_prefix}-(release|wake|sweep|ingest)$"

  # Log-based metric names are project-wide: a second instance (another
  # name_prefix) in the same project would collide on the bare names. The
  # logged `jsonPayload.metric` keeps the bare name; only the metric carries
  # the instance prefix.
  metric_name_prefix = "${var.name_prefix}_"

  user_metric = "logging.googleapis.com/user/${local.metric_name_prefix}"
  # The runbook ships with the source this module is deployed from.
  docs_runbook = "docs/runbook.md"
}

resource "google_logging_metric" "counter" {
  for_each = local.log_metrics

  project     = var.project_id
  name        = "${local.metric_name_prefix}${each.key}"
  description = each.value.description
  filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=~\"${local.services_regex}\"",
    "jsonPayload.metric=\"${each.key}\"",
  ])

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    dynamic "labels" {
      for_each = each.value.labels
      content {
        key        = labels.value
        value_type = "STRING"
      }
    }
  }

  label_extractors = {
    for l in each.value.labels : l => "EXTRACT(jsonPayload.labels.${l})"
  }

  depends_on = [google_project_service.apis]
}

resource "google_logging_metric" "distribution" {
  for_each = local.log_distributions

  project     = var.project_id
  name        = "${local.metric_name_prefix}${each.key}"
  description = each.value.description
  filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=~\"${local.services_regex}\"",
    "jsonPayload.metric=\"${each.key}\"",
  ])

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"

    dynamic "labels" {
      for_each = each.value.labels
      content {
        key        = labels.value
        value_type = "STRING"
      }
    }
  }

  value_extractor = "EXTRACT(jsonPayload.value)"
  label_extractors = {
    for l in each.value.labels : l => "EXTRACT(jsonPayload.labels.${l})"
  }

  bucket_options {
    explicit_buckets {
      bounds = lookup(local.distribution_buckets, each.key, local.histogram_buckets)
    }
  }

  depends_on = [google_project_service.apis]
}

# A log-based metric becomes visible to Cloud Monitoring minutes after it is
# created; an alert policy on it created in the same apply gets 404 "Cannot
# find metric(s)" (hashicorp/terraform-provider-google#11102). Wait once after
# the metrics are created (again only when one is renamed or recreated).
resource "time_sleep" "log_metrics" {
  create_duration = var.log_metric_wait
  triggers = {
    metrics = join(",", sort(concat(
      [for m in google_logging_metric.counter : m.id],
      [for m in google_logging_metric.distribution : m.id],
    )))
  }
}

# --- alerts: only what needs a person -------------------------------------------------
#
# A WakeNoCapacity is routine (the seat economy reclaims or the wake waits for
# a seat): it is on the dashboard, never paged. Each alert below links its
# entry in docs/runbook.md.

locals {
  alerts = {
    # The sweep adds WakeTimedOut once per wake older than wake_deadline.
    wake_timed_out = {
      display_name = "a wake has waited longer than ${var.wake_deadline}"
      severity     = "WARNING"
      filter       = "resource.type = \"cloud_run_revision\" AND metric.type = \"${local.user_metric}cocoon_hibernation_events_total\" AND metric.label.reason = \"WakeTimedOut\""
      group_by     = ["metric.label.namespace"]
      threshold    = 0
      duration     = "0s"
      window       = "300s"
      runbook      = "wake-timed-out"
    }
    # Every sweep run reconciles a release that has not finished: a set still
    # there in every window for alert_stuck_suspending_after is stuck.
    stuck_suspending = {
      display_name = "a CocoonSet stays Suspending longer than ${var.alert_stuck_suspending_after}"
      severity     = "WARNING"
      filter       = "resource.type = \"cloud_run_revision\" AND metric.type = \"${local.user_metric}cocoon_hibernation_release_pending_total\""
      group_by     = ["metric.label.namespace", "metric.label.cocoonset"]
      threshold    = 0
      duration     = var.alert_stuck_suspending_after
      window       = "300s"
      runbook      = "stuck-suspending"
    }
    # Admission (quota, PodSecurity, ServiceAccount, a webhook) refused a write:
    # nothing retries it into success, a person must change the cause.
    write_refused = {
      display_name = "the API server refuses a write (WriteRefused)"
      severity     = "ERROR"
      filter       = "resource.type = \"cloud_run_revision\" AND metric.type = \"${local.user_metric}cocoon_hibernation_events_total\" AND metric.label.reason = \"WriteRefused\""
      group_by     = ["metric.label.namespace"]
      threshold    = 0
      duration     = "0s"
      window       = "300s"
      runbook      = "write-refused"
    }
    # A delivery that failed max_delivery_attempts times: that event's work was
    # not done (the sweep may still converge it, the letter says what it was).
    dead_letters = {
      display_name = "undelivered events on a dead-letter subscription"
      severity     = "WARNING"
      filter       = "resource.type = \"pubsub_subscription\" AND metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.label.subscription_id = monitoring.regex.full_match(\"${var.name_prefix}-(release|wake)-dead-letter\")"
      group_by     = ["resource.label.subscription_id"]
      threshold    = 0
      duration     = "300s"
      window       = "300s"
      runbook      = "dead-letters"
    }
    # 5xx = a failure the platform retries (release, wake) or a crashed ingest.
    # A few are transient (an API server restart); a steady rate is not.
    function_errors = {
      display_name = "functions answer 5xx (more than ${var.alert_function_errors} in 10 min)"
      severity     = "ERROR"
      filter       = "resource.type = \"cloud_run_revision\" AND resource.label.service_name = monitoring.regex.full_match(\"${var.name_prefix}-(release|wake|sweep|ingest)\") AND metric.type = \"run.googleapis.com/request_count\" AND metric.label.response_code_class = \"5xx\""
      group_by     = ["resource.label.service_name"]
      threshold    = var.alert_function_errors
      duration     = "0s"
      window       = "600s"
      runbook      = "function-errors"
    }
  }
}

resource "google_monitoring_alert_policy" "alert" {
  for_each = local.alerts

  project      = var.project_id
  display_name = "cocoon-hibernation (${var.name_prefix}): ${each.value.display_name}"
  combiner     = "OR"
  severity     = each.value.severity

  conditions {
    display_name = each.value.display_name
    condition_threshold {
      filter          = each.value.filter
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.threshold
      duration        = each.value.duration

      aggregations {
        alignment_period = each.value.window
        # A gauge (the backlog) is read as its latest value, counts as sums.
        per_series_aligner   = each.key == "dead_letters" ? "ALIGN_MAX" : "ALIGN_SUM"
        cross_series_reducer = each.key == "dead_letters" ? "REDUCE_MAX" : "REDUCE_SUM"
        group_by_fields      = each.value.group_by
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "${each.value.display_name}. What to check and do: ${local.docs_runbook}#${each.value.runbook} in the cocoon-hibernation source."
  }

  notification_channels = var.alert_notification_channels
  user_labels           = local.labels

  depends_on = [time_sleep.log_metrics]
}

# --- dashboard ------------------------------------------------------------------------

# One tile per metric of shared/metric_names.py, generated by
# `python -m cocoon_hibernation.dashboards` (the Grafana dashboard of the
# self-hosted deployment comes from the same list).
resource "google_monitoring_dashboard" "overview" {
  project        = var.project_id
  dashboard_json = templatefile("${path.module}/dashboard.json.tftpl", { prefix = var.name_prefix })

  depends_on = [time_sleep.log_metrics]
}
