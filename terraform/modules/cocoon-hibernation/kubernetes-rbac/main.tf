# The Kubernetes bindings the functions' Google identities need, rendered
# from the emails the parent module creates: nothing here can drift from the
# service accounts (another name_prefix, another project). No provider: the
# parent outputs the manifest, and `terraform output -raw
# kubernetes_rbac_manifest | kubectl apply -f -` applies it (docs/production.md).
#
# The ClusterRoles themselves are infra/k8s/rbac.yaml (applied once per
# cluster); infra/k8s/gke-binding.yaml and namespace-binding.yaml are what
# this renders for name_prefix = "cocoon" (tests/deploy holds them equal), and
# namespace-read-binding.yaml the read RoleBinding that replaces the cluster-wide
# one when the allowlist is set.

variable "name_prefix" {
  description = "The parent module's name_prefix: names the bindings, so two instances in one cluster do not overwrite each other's subjects."
  type        = string
}

variable "users" {
  description = "Runtime service account email per function: each becomes a `kind: User` subject (GKE maps a Google token to a User named by its email)."
  type        = map(string)
}

variable "namespaces" {
  description = "Namespaces that get the per-namespace RoleBinding of the writer role."
  type        = list(string)
}

variable "read_namespaces" {
  description = "The allowlist (COCOON_NAMESPACES): when set, the reads are granted by a RoleBinding in each of these namespaces instead of cluster-wide."
  type        = list(string)
  default     = []
}

variable "token_review" {
  description = "Also bind ClusterRole cocoon-hibernation-tokenreview cluster-wide (TokenReview is cluster-scoped): for in-cluster callers verified by TokenReview (COCOON_CLUSTER_CALLERS)."
  type        = bool
  default     = false
}

locals {
  binding_name = "${var.name_prefix}-hibernation-functions"
  labels       = { "app.kubernetes.io/name" = "cocoon-hibernation" }

  subjects = [
    for fn in sort(keys(var.users)) : {
      apiGroup = "rbac.authorization.k8s.io"
      kind     = "User"
      name     = var.users[fn]
    }
  ]

  cluster_binding = {
    apiVersion = "rbac.authorization.k8s.io/v1"
    kind       = "ClusterRoleBinding"
    metadata   = { name = local.binding_name, labels = local.labels }
    roleRef = {
      apiGroup = "rbac.authorization.k8s.io"
      kind     = "ClusterRole"
      name     = "cocoon-hibernation"
    }
    subjects = local.subjects
  }

  read_bindings = [
    for ns in sort(distinct(var.read_namespaces)) : {
      apiVersion = "rbac.authorization.k8s.io/v1"
      kind       = "RoleBinding"
      metadata   = { name = "${local.binding_name}-read", namespace = ns, labels = local.labels }
      roleRef = {
        apiGroup = "rbac.authorization.k8s.io"
        kind     = "ClusterRole"
        name     = "cocoon-hibernation"
      }
      subjects = local.subjects
    }
  ]

  namespace_bindings = [
    for ns in sort(distinct(var.namespaces)) : {
      apiVersion = "rbac.authorization.k8s.io/v1"
      kind       = "RoleBinding"
      metadata   = { name = local.binding_name, namespace = ns, labels = local.labels }
      roleRef = {
        apiGroup = "rbac.authorization.k8s.io"
        kind     = "ClusterRole"
        name     = "cocoon-hibernation-writer"
      }
      subjects = local.subjects
    }
  ]

  token_review_binding = {
    apiVersion = "rbac.authorization.k8s.io/v1"
    kind       = "ClusterRoleBinding"
    metadata   = { name = "${local.binding_name}-tokenreview", labels = local.labels }
    roleRef = {
      apiGroup = "rbac.authorization.k8s.io"
      kind     = "ClusterRole"
      name     = "cocoon-hibernation-tokenreview"
    }
    subjects = local.subjects
  }

  # An allowlist confines the reads to it; without one the sweep lists every namespace.
  cluster_reads = [for b in [local.cluster_binding] : b if length(var.read_namespaces) == 0]
  token_reviews = [for b in [local.token_review_binding] : b if var.token_review]
  documents = concat(
    local.cluster_reads, local.read_bindings, local.namespace_bindings, local.token_reviews
  )
}

output "documents" {
  description = "The bindings as objects: the reads (one ClusterRoleBinding, or a RoleBinding per read namespace), then one RoleBinding of the writes per namespace."
  value       = local.documents
}

output "manifest" {
  description = "The same documents as one multi-document YAML stream, for kubectl apply -f -."
  value       = join("", [for d in local.documents : "---\n${yamlencode(d)}"])
}
