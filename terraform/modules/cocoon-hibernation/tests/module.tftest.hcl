# `terraform test` of the module against the provider schemas, with mocked
# providers: nothing reaches Google Cloud. Run by tests/deploy/test_terraform_provider.py
# (providers from the local mirror, see infra/scripts/build-terraform.sh).
# Each run asserts what a review once found wrong.

mock_provider "google" {
  # Generated values must pass the provider's own validations where a
  # resource feeds another (a service account's name into an IAM member).
  mock_resource "google_service_account" {
    defaults = {
      name   = "projects/acme-prod/serviceAccounts/mock-sa@acme-prod.iam.gserviceaccount.com"
      id     = "projects/acme-prod/serviceAccounts/mock-sa@acme-prod.iam.gserviceaccount.com"
      email  = "mock-sa@acme-prod.iam.gserviceaccount.com"
      member = "serviceAccount:mock-sa@acme-prod.iam.gserviceaccount.com"
    }
  }
  mock_data "google_project" {
    defaults = {
      number = "123456789012"
    }
  }
  mock_data "google_container_cluster" {
    defaults = {
      endpoint = "34.76.1.2"
      master_auth = [{
        cluster_ca_certificate    = "Q0xVU1RFUi1DQQ=="
        client_certificate        = ""
        client_key                = ""
        client_certificate_config = []
      }]
    }
  }
  mock_data "google_pubsub_topic" {
    defaults = {
      id = "projects/acme-prod/topics/gcr"
    }
  }
}

mock_provider "archive" {
  mock_data "archive_file" {
    defaults = {
      # Only computed fields may be mocked (OpenTofu enforces it).
      output_md5 = "0123456789abcdef0123456789abcdef"
    }
  }
}

mock_provider "random" {}
mock_provider "time" {}

variables {
  project_id  = "acme-prod"
  region      = "europe-west10"
  name_prefix = "cocoon"
  # The archive is mocked; the staged-source precondition still reads these.
  source_dir = "tests/source"
  # No gcloud here: the post-apply attach (a local-exec) stays off under mocks.
  attach_dead_letters = false
  gke_cluster = {
    name     = "agents"
    location = "europe-west10-a"
  }
  artifact_registry = {
    location      = "europe-west10"
    repository_id = "snapshots"
  }
  namespaces = ["agents"]
}

run "defaults" {
  command = apply

  # 3. Eventarc takes the bare Cloud Run service name.
  assert {
    condition = alltrue([
      for k, t in google_eventarc_trigger.audit :
      t.destination[0].cloud_run_service[0].service == "cocoon-${split(":", k)[0]}"
    ])
    error_message = "audit triggers must target the bare service name cocoon-<function>"
  }
  assert {
    condition     = contains(keys(google_eventarc_trigger.audit), "wake:io.k8s.core.v1.pods.status.patch:agents")
    error_message = "pod status writes in the namespace must reach wake"
  }

  # 1. The status triggers have their Data Access logs.
  assert {
    condition     = length(google_project_iam_audit_config.gke_data_write) == 1
    error_message = "DATA_WRITE audit logs must be on while status methods are routed"
  }
  assert {
    condition = (
      google_project_iam_audit_config.gke_data_write[0].service == "container.googleapis.com" &&
      [for c in google_project_iam_audit_config.gke_data_write[0].audit_log_config : c.log_type] == ["DATA_WRITE"]
    )
    error_message = "the audit config must enable DATA_WRITE for container.googleapis.com"
  }

  # 4. The IAM API is enabled.
  assert {
    condition     = contains(keys(google_project_service.apis), "iam.googleapis.com")
    error_message = "iam.googleapis.com must be enabled"
  }

  # 5. Builds run as their own account.
  assert {
    condition = alltrue([
      for f in google_cloudfunctions2_function.fn : f.build_config[0].service_account == google_service_account.build.id
    ])
    error_message = "every function must build as the module's build account"
  }
  assert {
    condition     = google_project_iam_member.build_image_writer.condition[0].expression == "resource.name.startsWith(\"projects/acme-prod/locations/europe-west10/repositories/gcf-artifacts\")"
    error_message = "the build may write images to gcf-artifacts only"
  }

  # 6. Metric names carry the instance prefix.
  assert {
    condition     = alltrue([for k, m in google_logging_metric.counter : m.name == "cocoon_${k}"])
    error_message = "log metric names must be <name_prefix>_<metric>"
  }

  # 7. Ack deadlines cover the function timeouts.
  assert {
    condition = alltrue([
      for a in values(output.dead_letter_attachments) : a.ack_deadline_seconds >= 300
    ])
    error_message = "every subscription's ack deadline must cover its function's timeout"
  }

  assert {
    condition = (
      output.dead_letter_attachments["sweep"].dead_letter_topic == null &&
      output.dead_letter_attachments["release"].dead_letter_topic != null &&
      output.dead_letter_attachments["sweep"].ack_deadline_seconds == 540 &&
      output.dead_letter_attachments["sweep"].trigger == google_cloudfunctions2_function.fn["sweep"].event_trigger[0].trigger
    )
    error_message = "the attachments carry each trigger's name, deadline and (retried only) dead-letter topic"
  }

  # 8. The sweep is not retried; release and wake are.
  assert {
    condition     = google_cloudfunctions2_function.fn["sweep"].event_trigger[0].retry_policy == "RETRY_POLICY_DO_NOT_RETRY"
    error_message = "a sweep tick must not be retried"
  }
  assert {
    condition = (
      google_cloudfunctions2_function.fn["release"].event_trigger[0].retry_policy == "RETRY_POLICY_RETRY" &&
      google_cloudfunctions2_function.fn["wake"].event_trigger[0].retry_policy == "RETRY_POLICY_RETRY"
    )
    error_message = "release and wake must retry"
  }

  # 10. The registry role is exactly manifest get, list and delete.
  assert {
    condition = toset(google_project_iam_custom_role.snapshot_manager.permissions) == toset([
      "artifactregistry.repositories.downloadArtifacts",
      "artifactregistry.tags.list",
      "artifactregistry.tags.delete",
      "artifactregistry.versions.delete",
    ])
    error_message = "the snapshot role must hold exactly what the code does"
  }
  assert {
    condition = alltrue([
      for g in google_artifact_registry_repository_iam_member.tag_deleter :
      g.role == google_project_iam_custom_role.snapshot_manager.id && startswith(g.member, "serviceAccount:")
    ])
    error_message = "runtime accounts get the custom role, on the repository"
  }

  # The IP endpoint keeps the cluster CA.
  assert {
    condition     = google_cloudfunctions2_function.fn["wake"].service_config[0].environment_variables["COCOON_KUBE_CA"] == "Q0xVU1RFUi1DQQ=="
    error_message = "the IP endpoint must pin the cluster CA"
  }
}

run "dns_endpoint_trusts_system_roots" {
  command = apply
  variables {
    kube_server_override = "https://gke-0123456789abcdef-acme-prod.europe-west10.gke.goog"
  }

  # 10. No cluster CA pinned for the DNS-based endpoint.
  assert {
    condition     = google_cloudfunctions2_function.fn["wake"].service_config[0].environment_variables["COCOON_KUBE_CA"] == ""
    error_message = "the DNS-based endpoint must trust the system roots"
  }
}

run "no_status_methods_no_data_access_logs" {
  command = plan
  variables {
    pod_status_audit_methods = []
    audit_methods            = ["io.k8s.core.v1.pods.update", "io.k8s.core.v1.pods.delete"]
  }

  assert {
    condition     = length(google_project_iam_audit_config.gke_data_write) == 0
    error_message = "no status method routed: no Data Access logs to pay for"
  }
}

# 2. Real regions and zones pass validation, near-misses do not.
run "two_digit_regions" {
  command = plan
  variables {
    region = "europe-west12"
    gke_cluster = {
      name     = "agents"
      location = "europe-west12-b"
    }
    artifact_registry = {
      location      = "europe"
      repository_id = "snapshots"
    }
  }
}

run "zone_is_not_a_region" {
  command = plan
  variables {
    region = "europe-west10-a"
  }
  expect_failures = [var.region]
}

run "global_is_not_a_registry_location" {
  command = plan
  variables {
    artifact_registry = {
      location      = "global"
      repository_id = "snapshots"
    }
  }
  expect_failures = [var.artifact_registry]
}
