# Example root module: cocoon-hibernation for one GKE cluster and one Artifact
# Registry repository. Stage the source first:
#
#   ./infra/scripts/build-source.sh
#   terraform -chdir=terraform/examples/gke init -backend-config=bucket=<state-bucket>
#   terraform -chdir=terraform/examples/gke apply
#   ./infra/scripts/attach-dead-letters.sh terraform/examples/gke

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
  labels                      = { "env" = var.environment }

  pod_status_audit_methods     = var.pod_status_audit_methods
  gke_data_write_audit_logs    = var.gke_data_write_audit_logs
  wake_deadline                = var.wake_deadline
  sweep_schedule               = var.sweep_schedule
  kube_server_override         = var.kube_server_override
  vpc_connector                = var.vpc_connector
  ingest_ingress               = var.ingest_ingress
  ingest_invoker_members       = var.ingest_invoker_members
  ingest_push_service_accounts = var.ingest_push_service_accounts
  eventarc_agent_wait          = var.eventarc_agent_wait
  log_metric_wait              = var.log_metric_wait
}
