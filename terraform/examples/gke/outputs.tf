output "function_uris" {
  description = "URL of each function."
  value       = module.cocoon_hibernation.function_uris
}

output "runtime_service_accounts" {
  description = "The kind: User subjects of infra/k8s/gke-binding.yaml and infra/k8s/namespace-binding.yaml."
  value       = module.cocoon_hibernation.runtime_service_accounts
}

output "pod_creators" {
  description = "The functions' Kubernetes usernames: add them to cocoon-webhook's POD_CREATORS (docs/cocoon-webhook.md)."
  value       = module.cocoon_hibernation.pod_creators
}

output "cocoon_webhook_pod_creators" {
  description = "POD_CREATORS for cocoon-webhook: the operator's account plus pod_creators."
  value       = module.cocoon_hibernation.cocoon_webhook_pod_creators
}

output "wake_requests_topic" {
  description = "Publish {\"namespace\":\"NS\",\"name\":\"SET\"} here to wake a set."
  value       = module.cocoon_hibernation.wake_requests_topic
}

output "sweep_topic" {
  description = "The scheduler's sweep topic."
  value       = module.cocoon_hibernation.sweep_topic
}

output "events_topic" {
  description = "Lifecycle CloudEvents topic."
  value       = module.cocoon_hibernation.events_topic
}

output "dead_letter_topics" {
  description = "Dead-letter topic per function."
  value       = module.cocoon_hibernation.dead_letter_topics
}

output "dead_letter_attachments" {
  description = "Read by infra/scripts/attach-dead-letters.sh."
  value       = module.cocoon_hibernation.dead_letter_attachments
}

output "ingest_token_secret" {
  description = "Secret holding ingest's bearer token."
  value       = module.cocoon_hibernation.ingest_token_secret
}

output "kubernetes_rbac_manifest" {
  description = "The functions' Kubernetes bindings with the real emails: terraform output -raw kubernetes_rbac_manifest | kubectl apply -f -"
  value       = module.cocoon_hibernation.kubernetes_rbac_manifest
}
