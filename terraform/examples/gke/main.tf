# Example root module: cocoon-hibernation for one GKE cluster and one Artifact
# Registry repository. Every input of the module can be set here (tests/deploy
# holds the two lists equal). Once:
#
#   terraform -chdir=terraform/examples/gke init -backend-config=bucket=<state-bucket>
#
# then every deploy is one command (docs/production.md): it stages the source,
# applies (which also attaches the dead letters and ack deadlines) and applies
# the Kubernetes bindings generated from the service accounts:
#
#   ./infra/scripts/deploy.sh terraform/examples/gke

module "cocoon_hibernation" {
  source = "../../modules/cocoon-hibernation"

  project_id  = var.project_id
  region      = var.region
  name_prefix = var.name_prefix

  # Written by infra/scripts/build-source.sh (relative to this directory).
  source_dir = "${path.module}/../../../build/function-source"

  gke_cluster       = var.gke_cluster
  artifact_registry = var.artifact_registry
  namespaces        = var.namespaces

  alert_notification_channels = var.alert_notification_channels
  labels                      = merge(var.labels, { "env" = var.environment })

  pod_status_audit_methods     = var.pod_status_audit_methods
  gke_data_write_audit_logs    = var.gke_data_write_audit_logs
  wake_deadline                = var.wake_deadline
  sweep_schedule               = var.sweep_schedule
  kube_server_override         = var.kube_server_override
  vpc_connector                = var.vpc_connector
  ingest_ingress               = var.ingest_ingress
  ingest_invoker_members       = var.ingest_invoker_members
  wake_publishers              = var.wake_publishers
  ingest_push_service_accounts = var.ingest_push_service_accounts
  eventarc_agent_wait          = var.eventarc_agent_wait
  log_metric_wait              = var.log_metric_wait

  enable_apis                       = var.enable_apis
  audit_methods                     = var.audit_methods
  sweep_time_zone                   = var.sweep_time_zone
  seat_reclaim_grace                = var.seat_reclaim_grace
  seat_order                        = var.seat_order
  cocoon_operator                   = var.cocoon_operator
  sweep_max_suspends                = var.sweep_max_suspends
  publish_lifecycle_events          = var.publish_lifecycle_events
  max_instances                     = var.max_instances
  dead_letter_retention             = var.dead_letter_retention
  dead_letter_max_delivery_attempts = var.dead_letter_max_delivery_attempts
  attach_dead_letters               = var.attach_dead_letters
  rbac_namespaces                   = var.rbac_namespaces
  kubernetes_token_review           = var.kubernetes_token_review
  alert_stuck_suspending_after      = var.alert_stuck_suspending_after
  alert_function_errors             = var.alert_function_errors
}
