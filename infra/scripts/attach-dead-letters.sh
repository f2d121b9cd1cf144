#!/usr/bin/env bash
# Attach the module's dead-letter topics to the Pub/Sub subscriptions Eventarc
# created for its triggers, and give each subscription an ack deadline that
# covers its function's timeout (Eventarc creates them with 10 s: a delivery
# still running after that is redelivered to a second instance). Terraform
# cannot declare either: Eventarc owns those subscriptions and its API has no
# field for them (hashicorp/terraform-provider-google#17697).
#
#   ./infra/scripts/attach-dead-letters.sh [TERRAFORM_ROOT_DIR]   # default terraform/examples/gke
#   ./infra/scripts/attach-dead-letters.sh --from-env   # JSON in $COCOON_DEAD_LETTER_ATTACHMENTS
#
# The module runs it itself at apply time (--from-env, dead_letters.tf) unless
# attach_dead_letters = false; then re-run it after every apply that creates or
# replaces a trigger (a new trigger gets a new subscription). Idempotent.
# Exits non-zero when a trigger has no subscription to update. Needs gcloud, jq
# (and terraform without --from-env), and
# permission to update the subscriptions (roles/pubsub.editor on the project,
# or a custom role with pubsub.subscriptions.update/setIamPolicy).
set -euo pipefail

if [ "${1:-}" = "--from-env" ]; then
  attachments="${COCOON_DEAD_LETTER_ATTACHMENTS:?--from-env: COCOON_DEAD_LETTER_ATTACHMENTS is not set}"
else
  root="${1:-terraform/examples/gke}"
  attachments="$(terraform -chdir="${root}" output -json dead_letter_attachments)"
fi
project_number=""
missing=0
list="$(mktemp)"
trap 'rm -f "${list}"' EXIT

jq -r 'to_entries[] | [.value.trigger, (.value.dead_letter_topic // "-"), (.value.max_delivery_attempts|tostring), (.value.ack_deadline_seconds|tostring)] | @tsv' \
  <<<"${attachments}" > "${list}"
# fd 3, not stdin: gcloud inside the loop must not read the list.
while IFS=$'\t' read -r -u 3 trigger topic attempts ack_deadline; do
  # trigger: projects/P/locations/L/triggers/T
  project="$(cut -d/ -f2 <<<"${trigger}")"
  location="$(cut -d/ -f4 <<<"${trigger}")"
  name="$(cut -d/ -f6 <<<"${trigger}")"
  if [ -z "${project_number}" ]; then
    project_number="$(gcloud projects describe "${project}" --format='value(projectNumber)')"
  fi
  sub="$(gcloud eventarc triggers describe "${name}" --project "${project}" --location "${location}" \
          --format='value(transport.pubsub.subscription)')"
  if [ -z "${sub}" ]; then
    echo "${name}: no Pub/Sub subscription: its dead letters and ack deadline are NOT set" >&2
    missing=$((missing + 1))
    continue
  fi
  if [ "${topic}" = "-" ]; then
    # Not retried (the sweep): no dead letters, only the ack deadline.
    echo "${sub}: ack deadline ${ack_deadline}s" >&2
    gcloud pubsub subscriptions update "${sub}" --project "${project}" \
      --ack-deadline "${ack_deadline}" --quiet
    continue
  fi
  echo "${sub} -> ${topic} (max ${attempts} attempts, ack deadline ${ack_deadline}s)" >&2
  gcloud pubsub subscriptions update "${sub}" --project "${project}" \
    --ack-deadline "${ack_deadline}" \
    --dead-letter-topic "${topic}" --max-delivery-attempts "${attempts}" --quiet
  # Pub/Sub forwards as its service agent, which must be able to ack the
  # source message; the publisher grant on the topic is in Terraform.
  gcloud pubsub subscriptions add-iam-policy-binding "${sub}" --project "${project}" \
    --member "serviceAccount:service-${project_number}@gcp-sa-pubsub.iam.gserviceaccount.com" \
    --role roles/pubsub.subscriber --quiet >/dev/null
done 3< "${list}"
if [ "${missing}" -gt 0 ]; then
  echo "${missing} trigger(s) without a subscription: re-run once Eventarc has created them" >&2
  exit 1
fi
