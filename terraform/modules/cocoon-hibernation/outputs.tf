output "function_uris" {
  description = "HTTPS URL of each function (Cloud Run service URL)."
  value       = { for k, f in google_cloudfunctions2_function.fn : k => f.service_config[0].uri }
}

output "ingest_url" {
  description = "ingest's URL; senders POST to <url>/registry or <url>/kubernetes/audit with an ID token (Cloud Run IAM) and the bearer token from ingest_token_secret."
  value       = google_cloudfunctions2_function.fn["ingest"].service_config[0].uri
}

output "runtime_service_accounts" {
  description = "Runtime service account email per function: the `kind: User` subjects of infra/k8s/gke-binding.yaml (cluster-wide reads) and infra/k8s/namespace-binding.yaml (writes, applied once per namespace)."
  value       = { for k, sa in google_service_account.runtime : k => sa.email }
}

output "pod_creators" {
  description = "The Kubernetes usernames of the functions that create pods (every function reconciles, so each may create the wake's restore pod): on GKE the API server sees a Google service account as its email. cocoon-webhook admits their pods only when each is in its POD_CREATORS (docs/cocoon-webhook.md)."
  value       = sort([for sa in google_service_account.runtime : sa.email])
}

output "cocoon_webhook_pod_creators" {
  description = "A POD_CREATORS value for cocoon-webhook: its default (the operator's service account) followed by pod_creators. Keep any other entry your cluster already lists (docs/cocoon-webhook.md)."
  value       = join(",", concat(["system:serviceaccount:cocoon-system:cocoon-operator"], sort([for sa in google_service_account.runtime : sa.email])))
}

output "wake_requests_topic" {
  description = "Publish {\"namespace\":\"NS\",\"name\":\"SET\"} here to wake a released set."
  value       = google_pubsub_topic.wake_requests.id
}

output "sweep_topic" {
  description = "Topic the scheduler ticks; publish {\"dryRun\": true} for a report-only sweep."
  value       = google_pubsub_topic.sweep.id
}

output "events_topic" {
  description = "Lifecycle CloudEvents topic (COCOON_EVENTS_TOPIC), or null when disabled."
  value       = var.publish_lifecycle_events ? google_pubsub_topic.events[0].id : null
}

output "dead_letter_topics" {
  description = "Dead-letter topic per CloudEvent function."
  value       = { for k, t in google_pubsub_topic.dead_letter : k => t.id }
}

output "dead_letter_attachments" {
  description = "Input of infra/scripts/attach-dead-letters.sh, keyed by function (release, wake, sweep) and audit route (audit:<route>): each Eventarc trigger's full name, its subscription's ack deadline (at least its function's timeout, so a delivery is not redelivered while the function still runs) and, for retried triggers, the dead-letter topic (null for the sweep, which never retries). Keys are known at plan time; trigger names only after apply."
  value       = local.dead_letter_attachments
}

output "ingest_token_secret" {
  description = "Secret Manager secret holding ingest's bearer token (the value itself is never output)."
  value       = google_secret_manager_secret.ingest_token.id
}

output "ingest_push_audience" {
  description = "Audience for a Pub/Sub push subscription's oidc_token to <ingest_url>/pubsub (COCOON_PUSH_AUDIENCE, set once ingest_push_service_accounts is; Cloud Run accepts it too)."
  value       = local.ingest_push_audience
}

output "kubernetes_rbac_manifest" {
  description = "The functions' Kubernetes bindings (the reads: a ClusterRoleBinding, or with `namespaces` set a RoleBinding per namespace; a RoleBinding of the writes per namespace of namespaces + rbac_namespaces) with the real runtime emails: `terraform output -raw kubernetes_rbac_manifest | kubectl apply -f -` after infra/k8s/rbac.yaml."
  value       = module.kubernetes_rbac.manifest
}
