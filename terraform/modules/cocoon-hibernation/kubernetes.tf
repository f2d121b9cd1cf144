# The Kubernetes side of the functions' access, generated from the service
# accounts this module creates (kubernetes-rbac/): with any name_prefix or
# project the subjects are the real emails. Applied with one command after
# `terraform apply` (docs/production.md, "First apply"):
#
#   terraform -chdir=terraform/examples/gke output -raw kubernetes_rbac_manifest | kubectl apply -f -
#
# infra/k8s/rbac.yaml (the ClusterRoles) is applied once per cluster before.

module "kubernetes_rbac" {
  source = "./kubernetes-rbac"

  name_prefix = var.name_prefix
  users       = { for k, sa in google_service_account.runtime : k => sa.email }
  # The writes are granted per namespace only: the allowlist, plus the
  # namespaces a user names for the all-namespaces case.
  namespaces = distinct(concat(var.namespaces, var.rbac_namespaces))
  # With an allowlist the functions read nowhere else: no cluster-wide read either.
  read_namespaces = var.namespaces
  token_review    = var.kubernetes_token_review
}
