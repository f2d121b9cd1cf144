# The reference operator's counters (SPEC §8), rebuilt from the functions'
# structured logs: shared/log.py writes
#   {"metric": NAME, "value": 1, "labels": {...}, "severity": "INFO", ...}
# as jsonPayload, one entry per increment, so a counter metric (DELTA/INT64,
# no value extractor) counting matching entries is the counter.

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
    # Writes refused by admission (a plugin, or cocoon-webhook's POD_CREATORS or
    # CocoonSet rules): one per refusal situation, with its WriteRefused Warning.
    cocoon_hibernation_admission_refused_total = {
      description = "Writes refused by admission (quota, PodSecurity, cocoon-webhook), once per situation."
      labels      = ["namespace", "cocoonset", "write", "webhook"]
    }
  }

  services_regex = "^${var.name_prefix}-(release|wake|sweep|ingest)$"

  # Log-based metric names are project-wide: a second instance (another
  # name_prefix) in the same project would collide on the bare names. The
  # logged `jsonPayload.metric` keeps the bare name; only the metric carries
  # the instance prefix.
  metric_name_prefix = "${var.name_prefix}_"
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

# A log-based metric becomes visible to Cloud Monitoring minutes after it is
# created; an alert policy on it created in the same apply gets 404 "Cannot
# find metric(s)" (hashicorp/terraform-provider-google#11102). Wait once after
# the metrics are created (again only when one is renamed or recreated).
resource "time_sleep" "log_metrics" {
  create_duration = var.log_metric_wait
  triggers = {
    metrics = join(",", sort([for m in google_logging_metric.counter : m.id]))
  }
}

resource "google_monitoring_alert_policy" "wake_unschedulable" {
  project      = var.project_id
  display_name = "cocoon-hibernation: wake has no seat (${var.name_prefix})"
  combiner     = "OR"
  severity     = "WARNING"

  conditions {
    display_name = "cocoon_operator_slot_release_wake_unschedulable_total > 0"
    condition_threshold {
      filter          = "resource.type = \"cloud_run_revision\" AND metric.type = \"logging.googleapis.com/user/${google_logging_metric.counter["cocoon_operator_slot_release_wake_unschedulable_total"].name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.namespace", "metric.label.cocoonset"]
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
    content   = <<-EOT
      A released CocoonSet is waking but its main pod is Unschedulable: no node
      in its pool has a free seat. The wake keeps waiting (a seat may free); the
      set carries a `WakeNoCapacity` Warning event with the scheduler's message.
      Check `kubectl get events -n <namespace> --field-selector reason=WakeNoCapacity`
      and the pool's capacity. After COCOON_WAKE_DEADLINE the sweep adds `WakeTimedOut`.
    EOT
  }

  notification_channels = var.alert_notification_channels
  user_labels           = local.labels

  depends_on = [time_sleep.log_metrics]
}
