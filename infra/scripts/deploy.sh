#!/usr/bin/env bash
# One deploy of cocoon-hibernation on Google Cloud, every step in order:
#
#   ./infra/scripts/deploy.sh [TERRAFORM_ROOT_DIR] [terraform apply args...]
#                                        # default root: terraform/examples/gke
#
#   1. stage the function source (build-source.sh): Terraform zips what is
#      staged, so a skipped staging would deploy the previous code;
#   2. terraform apply: functions, triggers, alerts, and (attach_dead_letters,
#      on by default) the dead letters and ack deadlines of the subscriptions
#      Eventarc creates;
#   3. the Kubernetes bindings generated from the service accounts
#      (kubernetes_rbac_manifest) applied with kubectl to the current context,
#      after infra/k8s/rbac.yaml (the roles they bind).
#
# Set COCOON_SKIP_KUBECTL=1 to stop after step 2 (then apply the manifest from
# `terraform output -raw kubernetes_rbac_manifest` yourself). Needs uv,
# terraform and kubectl (pointed at the cluster); step 2 needs gcloud and jq
# unless attach_dead_letters = false. Any failing step stops the script with
# its exit code.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
root="terraform/examples/gke"
if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
  root="$1"
  shift
fi

echo "deploy: 1/3 staging the function source" >&2
bash "${repo_root}/infra/scripts/build-source.sh"

echo "deploy: 2/3 terraform apply in ${root}" >&2
terraform -chdir="${root}" apply "$@"

if [ "${COCOON_SKIP_KUBECTL:-}" = "1" ]; then
  echo "deploy: 3/3 skipped (COCOON_SKIP_KUBECTL=1): apply the output kubernetes_rbac_manifest yourself" >&2
  exit 0
fi
echo "deploy: 3/3 Kubernetes roles and bindings (kubectl context: $(kubectl config current-context))" >&2
kubectl apply -f "${repo_root}/infra/k8s/rbac.yaml"
manifest="$(terraform -chdir="${root}" output -raw kubernetes_rbac_manifest)"
kubectl apply -f - <<<"${manifest}"
