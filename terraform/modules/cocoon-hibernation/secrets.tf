# The bearer token `ingest` requires (COCOON_INGEST_TOKEN). Generated here so
# no human handles it; read it once to configure a webhook sender:
#   gcloud secrets versions access latest --secret=<output ingest_token_secret>
# The value is in Terraform state: keep the state in an encrypted, access-
# controlled backend (the example declares a GCS backend whose bucket is given
# at `terraform init -backend-config=bucket=...`). Rotate with
# `terraform apply -replace=module.<name>.random_password.ingest_token`.

resource "random_password" "ingest_token" {
  length  = 48
  special = false # sent in an HTTP header and pasted into YAML
}

resource "google_secret_manager_secret" "ingest_token" {
  project   = var.project_id
  secret_id = "${var.name_prefix}-ingest-token"
  labels    = local.labels

  replication {
    auto {}
  }

  depends_on = [google_project_service.apis]
}

resource "google_secret_manager_secret_version" "ingest_token" {
  secret      = google_secret_manager_secret.ingest_token.id
  secret_data = random_password.ingest_token.result
}
