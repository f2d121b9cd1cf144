# GKE audit logs -> release and wake (pod status writes -> wake only, see
# local.pod_status_routes). A CF2 function has exactly one
# event_trigger (theirs is a Pub/Sub topic), so each audited method gets an
# extra Eventarc trigger aimed at the function's Cloud Run service
# (docs/design.md#event-sources). Eventarc triggers created directly retry
# by default (Pub/Sub backoff 10 s..600 s for 24 h); `retry_policy` on this
# resource only accepts max_attempts = 1 (= no retry), so it is left unset.
#
# Eventarc creates and owns each trigger's Pub/Sub subscription; neither the
# API nor the provider lets a dead-letter policy be declared on it
# (hashicorp/terraform-provider-google#17697). The dead-letter topics are
# declared in pubsub.tf and attached after apply by
# infra/scripts/attach-dead-letters.sh; events that still expire are what the
# scheduled sweep exists for (docs/design.md#sweep).

resource "google_eventarc_trigger" "audit" {
  for_each = local.audit_routes

  project = var.project_id
  # Audit-log triggers may be global; GKE clusters may be zonal, and a global
  # trigger receives entries from every location.
  location = "global"
  # A namespace-narrowed trigger carries a short hash of its namespace: names
  # stay within Eventarc's limit whatever the namespace's length.
  name            = "${var.name_prefix}-${each.value.function}-${replace(regex("\\.v1\\.(.+)$", each.value.method)[0], ".", "-")}${each.value.namespace == null ? "" : "-${substr(sha1(each.value.namespace), 0, 8)}"}"
  service_account = google_service_account.trigger[each.value.function].email
  labels          = local.labels

  matching_criteria {
    attribute = "type"
    value     = "google.cloud.audit.log.v1.written"
  }
  matching_criteria {
    attribute = "serviceName"
    value     = "k8s.io"
  }
  matching_criteria {
    attribute = "methodName"
    value     = each.value.method
  }
  # GKE resourceName is core/v1/namespaces/NS/pods/NAME[/status]; `**` takes
  # the pod and its subresource (shared/adapters/audit_events.py maps it).
  dynamic "matching_criteria" {
    for_each = each.value.namespace == null ? [] : [each.value.namespace]
    content {
      attribute = "resourceName"
      operator  = "match-path-pattern"
      value     = "/core/v1/namespaces/${matching_criteria.value}/pods/**"
    }
  }

  # The bare Cloud Run service name, as the Eventarc API takes it: the
  # function's service_config.service is the full projects/.../services/N
  # resource name. A gen2 function's service carries the function's name;
  # depends_on below makes sure it exists.
  destination {
    cloud_run_service {
      service = local.function_names[each.value.function]
      region  = var.region
    }
  }

  depends_on = [
    google_cloudfunctions2_function.fn,
    google_project_iam_member.event_receiver,
    google_cloud_run_service_iam_member.trigger_invoker,
    google_project_iam_audit_config.gke_data_write,
    time_sleep.eventarc_agent,
  ]
}
