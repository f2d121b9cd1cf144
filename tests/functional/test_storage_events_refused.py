"""Bucket events of the retired epoch push source are acknowledged and dropped, never acted on.

epoch (cocoonstack's old registry over object storage) is archived upstream, and its
push source is gone (CHANGELOG). A trigger or a notification left pointing at the
functions still delivers what epoch's bucket used to send: a GCS object-finalize
CloudEvent to `release`, an S3 event notification or an EventBridge "Object Created"
to `ingest POST /registry`. Each must be answered as any type the target does not
take is answered today: a 2xx (redelivery cannot help, so no retry and no dead
letter), one `dropped` log line that names the reason and the type, and no client
built. Run through the real targets (main.py, functions-framework) in a fresh
interpreter, so the log lines and the loaded modules are this request's alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.conftest import REPO_ROOT

GCS_FINALIZED = "google.cloud.storage.object.v1.finalized"
BUCKET = "snapshots-bucket"
# The tag object a `<vm>:hibernate` push wrote: exactly what used to free a seat.
TAG_OBJECT = "epoch/manifests/vk-team-a-agent-0/hibernate.json"

PROBE = r"""
import json, os, sys
os.environ.update({"COCOON_REGISTRY_BASE": "registry.example.com", "KUBECONFIG": "/nonexistent",
                   "COCOON_INGEST_TOKEN": "probe-token-0123456789abcdef0123456789",
                   "COCOON_LOG_FORMAT": "json"})
import functions_framework
from cloudevents.http import CloudEvent, to_binary
case = json.loads(sys.argv[2])
if case["target"] == "release":
    client = functions_framework.create_app(target="release", source=sys.argv[1]).test_client()
    headers, body = to_binary(CloudEvent(case["attributes"], case["data"]))
    reply = client.post("/", headers=headers, data=body)
else:
    client = functions_framework.create_app(target="ingest", source=sys.argv[1]).test_client()
    reply = client.post("/registry", data=json.dumps(case["data"]),
                        headers={"Authorization": "Bearer probe-token-0123456789abcdef0123456789",
                                 "Content-Type": "application/json"})
heavy = {"kubernetes", "boto3", "botocore", "google.auth", "google.cloud.pubsub"}
print(json.dumps({"status": reply.status_code, "body": reply.get_data(as_text=True),
                  "loaded": sorted(m for m in heavy if m in sys.modules)}))
"""


def _run(case: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The reply and every JSON log line of one request to a fresh target."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO_ROOT / "main.py"), json.dumps(case)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    return lines[-1], lines[:-1]


def test_a_gcs_object_finalize_to_release_is_dropped_as_not_accepted() -> None:
    # The shape Eventarc's storage trigger delivered: binary mode, StorageObjectData.
    reply, logs = _run(
        {
            "target": "release",
            "attributes": {
                "type": GCS_FINALIZED,
                "source": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
                "subject": f"objects/{TAG_OBJECT}",
                "id": "gcs-finalize-1",
            },
            "data": {
                "kind": "storage#object",
                "bucket": BUCKET,
                "name": TAG_OBJECT,
                "id": f"{BUCKET}/{TAG_OBJECT}/1588778055917163",
                "generation": 1588778055917163,
                "contentType": "application/json",
                "size": 1024,
                "timeCreated": "2026-07-01T10:00:00.000Z",
            },
        }
    )
    # Acknowledged (2xx: Eventarc neither retries nor dead-letters it), no client built.
    assert reply["status"] == 200
    assert reply["loaded"] == []
    dropped = [x for x in logs if x.get("message") == "event dropped"]
    assert len(dropped) == 1, logs
    line = dropped[0]
    assert (line["target"], line["outcome"], line["reason"]) == (
        "release",
        "dropped",
        "type-not-accepted",
    )
    assert line["detail"] == GCS_FINALIZED
    assert line["event_id"] == "gcs-finalize-1"
    assert line["severity"] == "INFO"
    assert not [x for x in logs if x.get("severity") == "ERROR"]


def test_s3_and_eventbridge_bucket_events_to_ingest_are_dropped_with_a_reason() -> None:
    s3 = {
        "Records": [
            {
                "eventVersion": "2.0",
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "responseElements": {"x-amz-request-id": "C3D13FE58DE4C810"},
                "s3": {"bucket": {"name": BUCKET}, "object": {"key": TAG_OBJECT, "size": 1024}},
            }
        ]
    }
    eventbridge = {
        "version": "0",
        "id": "6c540ad4-0671-9974-6511-756fbd7771c3",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "detail": {"bucket": {"name": BUCKET}, "object": {"key": TAG_OBJECT}},
    }
    for body, reason, detail in (
        (s3, "malformed", "unrecognised registry notification"),
        (eventbridge, "unknown-type", "detail-type=Object Created"),
    ):
        reply, logs = _run({"target": "ingest", "data": body})
        assert reply["status"] == 202, reply
        assert json.loads(reply["body"]) == {"accepted": 0, "dropped": 1}
        assert reply["loaded"] == []
        (line,) = [x for x in logs if x.get("message") == "ingest event dropped"]
        assert line["reason"] == reason
        assert detail in line["detail"], line
