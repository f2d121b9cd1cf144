#!/usr/bin/env bash
# Attach the module's dead-letter topics to the Pub/Sub subscriptions Eventarc
# created for its triggers. Terraform cannot declare them: Eventarc owns those
# subscriptions and its API has no dead-letter field
# (hashicorp/terraform-provider-google#17697).
#
#   ./infra/scripts/attach-dead-letters.sh [TERRAFORM_ROOT_DIR]   # default terraform/examples/gke
#
# Re-run it after every apply that creates or replaces a trigger (a new trigger
# gets a new subscription). Idempotent. Needs gcloud, jq and terraform, and
# permission to update the subscriptions (roles/pubsub.editor on the project,
# or a custom role with pubsub.subscriptions.update/setIamPolicy).
set -euo pipefail

root="${1:-terraform/examples/gke}"
attachments="$(terraform -chdir="${root}" output -json dead_letter_attachments)"
project_number=""

jq -r 'to_entries[] | [.key, .value.dead_letter_topic, (.value.max_delivery_attempts|tostring)] | @tsv' \
  <<<"${attachments}" |
while IFS=$'\t' read -r trigger topic attempts; do
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
    echo "skip ${name}: no Pub/Sub subscription (yet)" >&2
    continue
  fi
  echo "${sub} -> ${topic} (max ${attempts} attempts)" >&2
  gcloud pubsub subscriptions update "${sub}" --project "${project}" \
    --dead-letter-topic "${topic}" --max-delivery-attempts "${attempts}" --quiet
  # Pub/Sub forwards as its service agent, which must be able to ack the
  # source message; the publisher grant on the topic is in Terraform.
  gcloud pubsub subscriptions add-iam-policy-binding "${sub}" --project "${project}" \
    --member "serviceAccount:service-${project_number}@gcp-sa-pubsub.iam.gserviceaccount.com" \
    --role roles/pubsub.subscriber --quiet >/dev/null
done
