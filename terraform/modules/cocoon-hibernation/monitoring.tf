# The reference operator's counters (SPEC §8), rebuilt from the functions'
# structured logs: shared/log.py writes
#   {"metric": NAME, "value": 1, "labels": {...}, "severity": "INFO", ...}
# as jsonPayload, one entry per increment, so a counter metric (DELTA/INT64,
# no value extractor) counting matching entries is the counter.

locals {
  log_metrics = {
    slot_release_pods_deleted_total = {
      description = "Pods deleted to release a suspended CocoonSet's seat."
      labels      = ["namespace", "cocoonset"]
    }
    slot_release_wake_total = {
      description = "Completed wakes of released CocoonSets, by placement (hint-node or pool)."
      labels      = ["namespace", "cocoonset", "placement"]
    }
    slot_release_wake_unschedulable_total = {
      description = "Wake attempts whose main pod was Unschedulable (no seat free)."
      labels      = ["namespace", "cocoonset"]
    }
    # The seat economy's own counter (not the reference operator's): idle seats
    # taken for waiting wakes, by the victim's namespace and the seat's pool.
    cocoon_hibernation_seat_reclaims_total = {
      description = "Idle reclaimable seats taken for a waiting wake (victim namespace, pool)."
      labels      = ["namespace", "pool"]
    }
  }

  services_regex = "^${var.name_prefix}-(release|wake|sweep|ingest)$"
}

resource "google_logging_metric" "counter" {
  for_each = local.log_metrics

  project     = var.project_id
  name        = each.key
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

resource "google_monitoring_alert_policy" "wake_unschedulable" {
  project      = var.project_id
  display_name = "cocoon-hibernation: wake has no seat (${var.name_prefix})"
  combiner     = "OR"
  severity     = "WARNING"

  conditions {
    display_name = "slot_release_wake_unschedulable_total > 0"
    condition_threshold {
      filter          = "resource.type = \"cloud_run_revision\" AND metric.type = \"logging.googleapis.com/user/${google_logging_metric.counter["slot_release_wake_unschedulable_total"].name}\""
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
}
