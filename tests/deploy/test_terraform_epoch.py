"""The opt-in Eventarc storage trigger for epoch's bucket (terraform/.../epoch.tf), statically."""

from __future__ import annotations

import pytest

from shared import constants as c
from shared.adapters import ACCEPT_RELEASE
from shared.config import Settings
from tests.deploy._hcl import MODULE_DIR, TfDir, blocks, load_dir, norm


@pytest.fixture(scope="module")
def module() -> TfDir:
    return load_dir(MODULE_DIR)


def test_the_trigger_exists_only_with_a_bucket(module: TfDir) -> None:
    var = module.variables["epoch_bucket"]
    assert var["default"] is None
    assert module.locals["epoch_enabled"] == "${var.epoch_bucket != null}"
    for rtype, name in (
        ("google_eventarc_trigger", "epoch_finalized"),
        ("google_project_iam_member", "gcs_agent_publisher"),
    ):
        assert module.resource(rtype, name)["count"] == "${local.epoch_enabled ? 1 : 0}"


def test_object_finalize_of_the_bucket_reaches_release(module: TfDir) -> None:
    trig = module.resource("google_eventarc_trigger", "epoch_finalized")
    criteria = {m["attribute"]: m["value"] for m in trig["matching_criteria"]}
    assert criteria == {"type": c.CE_GCS_FINALIZED, "bucket": "${var.epoch_bucket.name}"}
    assert c.CE_GCS_FINALIZED in ACCEPT_RELEASE
    run = blocks(blocks(trig, "destination")[0], "cloud_run_service")[0]
    assert run["service"] == '${local.function_names["release"]}'
    assert trig["service_account"] == '${google_service_account.trigger["release"].email}'
    # A storage trigger must live in its bucket's location.
    assert "var.epoch_bucket.location" in trig["location"]
    # Retries as the audit triggers do (unset = Pub/Sub backoff), never max_attempts=1.
    assert "retry_policy" not in trig
    for dep in (
        "${google_project_iam_member.gcs_agent_publisher}",
        "${google_project_iam_member.event_receiver}",
        "${time_sleep.eventarc_agent}",
        "${google_cloudfunctions2_function.fn}",
    ):
        assert dep in trig["depends_on"]


def test_only_the_storage_agent_may_publish(module: TfDir) -> None:
    grant = module.resource("google_project_iam_member", "gcs_agent_publisher")
    assert grant["role"] == "roles/pubsub.publisher"
    assert grant["member"] == (
        "serviceAccount:${data.google_storage_project_service_account.gcs[0].email_address}"
    )


def test_the_prefix_reaches_the_functions_with_the_code_default(module: TfDir) -> None:
    var = module.variables["epoch_bucket"]
    assert "prefix=optional(string,epoch/)" in norm(var["type"])
    env = module.locals["env_common"]
    assert norm(env["COCOON_EPOCH_PREFIX"]) == (
        "${var.epoch_bucket==null?epoch/:var.epoch_bucket.prefix}"
    )
    assert Settings().epoch_prefix == "epoch/"
    assert len(var["validation"]) == 3


def test_the_trigger_gets_its_ack_deadline_and_dead_letter_after_apply(module: TfDir) -> None:
    # infra/scripts/attach-dead-letters.sh reads dead_letter_attachments: the storage
    # trigger's Eventarc-owned subscription is listed like the audit triggers'.
    assert norm(module.outputs["dead_letter_attachments"]["value"]) == (
        "${local.dead_letter_attachments}"
    )
    value = norm(module.locals["dead_letter_attachments"])
    assert "fortingoogle_eventarc_trigger.epoch_finalized:epoch:release=>" in value.replace('"', "")
    assert 'ack_deadline_seconds=local.ack_deadline_seconds["release"]' in value or (
        "ack_deadline_seconds=local.ack_deadline_seconds[release]" in value
    )
