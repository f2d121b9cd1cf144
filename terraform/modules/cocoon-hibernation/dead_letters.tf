# Dead letters and ack deadlines on the subscriptions Eventarc creates for the
# triggers. Neither the Eventarc API nor the provider can declare them
# (hashicorp/terraform-provider-google#17697): Eventarc owns those
# subscriptions. So the apply itself runs infra/scripts/attach-dead-letters.sh
# on them (terraform_data is built into Terraform: no extra provider), again
# whenever a trigger is created or replaced. Forgetting this step left every
# subscription at Eventarc's 10 s ack deadline: a delivery still running after
# 10 s was redelivered to a second instance (docs/production.md).
#
# It needs gcloud and jq on the machine that applies, logged in with the right
# to update the subscriptions (roles/pubsub.editor, or
# pubsub.subscriptions.update + setIamPolicy). Without them the apply fails
# at this step with the script's message, and the next apply runs it again.
# The script is read from the checkout the module comes from (a local path or
# a git source: both carry infra/scripts). attach_dead_letters = false leaves
# it to a manual run of the script.

locals {
  dead_letter_attachments = merge(
    {
      for k, f in google_cloudfunctions2_function.fn : k => {
        trigger               = f.event_trigger[0].trigger
        ack_deadline_seconds  = local.ack_deadline_seconds[k]
        dead_letter_topic     = contains(local.retried_functions, k) ? google_pubsub_topic.dead_letter[k].id : null
        max_delivery_attempts = var.dead_letter_max_delivery_attempts
      } if length(f.event_trigger) > 0
    },
    {
      for k, t in google_eventarc_trigger.audit : "audit:${k}" => {
        trigger               = t.id
        ack_deadline_seconds  = local.ack_deadline_seconds[local.audit_routes[k].function]
        dead_letter_topic     = google_pubsub_topic.dead_letter[local.audit_routes[k].function].id
        max_delivery_attempts = var.dead_letter_max_delivery_attempts
      }
    },
  )
}

resource "terraform_data" "attach_dead_letters" {
  count = var.attach_dead_letters ? 1 : 0

  # A new trigger gets a new subscription: re-run for it.
  triggers_replace = local.dead_letter_attachments

  provisioner "local-exec" {
    command = "bash '${path.module}/../../../infra/scripts/attach-dead-letters.sh' --from-env"
    environment = {
      COCOON_DEAD_LETTER_ATTACHMENTS = jsonencode(local.dead_letter_attachments)
    }
  }
}
