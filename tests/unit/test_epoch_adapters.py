"""epoch's bucket events (GCS finalize, S3 notification, EventBridge) -> `SnapshotPushed`.

Each payload is the public sample in ../shared/reference/payloads/ with only the
bucket and the object name adapted; every other field stays as published.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest

from shared.adapters import ACCEPT_RELEASE, DropReason, parse_cloudevent, parse_registry_webhook
from shared.config import Settings, parse_registry_base
from shared.constants import CE_GCS_FINALIZED
from shared.triggers import SnapshotPushed, Source
from tests.conftest import REFERENCE_DIR, REPO_ROOT, needs_reference

pytestmark = needs_reference

VM = "vk-team-a-agent-0"
BUCKET = "epoch-snapshots"
# epoch's repositories are the VM names themselves (vk-cocoon pushes `<vm>:hibernate`).
SETTINGS = Settings(registry_base=parse_registry_base("epoch.example.com"))


def sample(name: str) -> dict[str, Any]:
    assert REFERENCE_DIR is not None
    data: dict[str, Any] = json.loads((REFERENCE_DIR / "payloads" / name).read_text())
    return data


def gcs(key: str) -> dict[str, Any]:
    data = sample("gcs-storage-object-data.json")
    data["bucket"], data["name"] = BUCKET, key
    return data


def s3(*keys: str, event: str | None = None) -> dict[str, Any]:
    envelope = sample("s3-event-notification.json")
    template = envelope["Records"][0]
    records = []
    for key in keys:
        record = copy.deepcopy(template)
        record["s3"]["bucket"]["name"] = BUCKET
        record["s3"]["object"]["key"] = key
        if event is not None:
            record["eventName"] = event
        records.append(record)
    envelope["Records"] = records
    return envelope


def eventbridge(key: str) -> dict[str, Any]:
    event = sample("eventbridge-s3-object-created.json")
    event["detail"]["bucket"]["name"] = BUCKET
    event["detail"]["object"]["key"] = key
    return event


class FakeEvent:
    """The duck-typed CloudEvent interface the adapters read (cloudevents 1.x)."""

    def __init__(self, ce_type: str, data: Any) -> None:
        self._attrs = {"type": ce_type, "id": "gcs-1", "source": f"//storage/{BUCKET}"}
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self._attrs[key]

    def get_attributes(self) -> dict[str, Any]:
        return self._attrs


def release(data: Any, settings: Settings = SETTINGS) -> Any:
    return parse_cloudevent(
        FakeEvent(CE_GCS_FINALIZED, data), settings=settings, accept=ACCEPT_RELEASE
    )


def ingest(body: Any, settings: Settings = SETTINGS) -> Any:
    return parse_registry_webhook(json.dumps(body).encode(), "application/json", settings)


HIBERNATE_KEY = f"epoch/manifests/{VM}/hibernate.json"
IRRELEVANT = [
    (f"epoch/manifests/{VM}/_digests/sha256-{'a' * 64}.json", DropReason.DIGEST_OBJECT),
    ("epoch/catalog.json", DropReason.CATALOG),
    (f"epoch/manifests/{VM}/latest.json", DropReason.TAG),
    (f"epoch/blobs/sha256/{'b' * 64}", DropReason.BLOB),
    (f"other/manifests/{VM}/hibernate.json", DropReason.OBJECT_PREFIX),
    ("epoch/manifests/hibernate.json", DropReason.NOT_A_TAG_OBJECT),
    ("epoch/something-else.bin", DropReason.NOT_A_TAG_OBJECT),
    ("epoch/manifests/windows/win11/hibernate.json", DropReason.OUTSIDE_BASE),
]


def test_a_gcs_finalize_of_the_hibernate_tag_object_is_a_push() -> None:
    parsed = release(gcs(HIBERNATE_KEY))
    assert parsed.triggers == [
        SnapshotPushed(VM, "hibernate", None, Source.EPOCH_GCS, VM, event_id="gcs-1")
    ]
    assert parsed.dropped == []


def test_an_s3_notification_and_an_eventbridge_event_are_pushes() -> None:
    for body in (s3(HIBERNATE_KEY), eventbridge(HIBERNATE_KEY)):
        parsed = ingest(body)
        assert [(t.repository, t.tag, t.vm_name, t.source) for t in parsed.triggers] == [
            (VM, "hibernate", VM, Source.EPOCH_S3)
        ], parsed.dropped


@pytest.mark.parametrize(("key", "reason"), IRRELEVANT)
def test_every_other_object_is_dropped_with_its_reason(key: str, reason: DropReason) -> None:
    for parsed in (release(gcs(key)), ingest(s3(key)), ingest(eventbridge(key))):
        assert parsed.triggers == []
        assert [d.reason for d in parsed.dropped] == [reason], parsed.dropped


def test_one_push_as_the_bucket_sees_it_yields_exactly_one_trigger() -> None:
    # The order epoch writes the objects of one `PushManifestJSON`, blobs first.
    keys = [
        f"epoch/blobs/sha256/{'c' * 64}",
        f"epoch/manifests/{VM}/_digests/sha256-{'d' * 64}.json",
        HIBERNATE_KEY,
        "epoch/catalog.json",
    ]
    parsed = ingest(s3(*keys))
    assert [t.vm_name for t in parsed.triggers] == [VM]
    assert [d.reason for d in parsed.dropped] == [
        DropReason.BLOB,
        DropReason.DIGEST_OBJECT,
        DropReason.CATALOG,
    ]


def test_the_prefix_is_a_setting() -> None:
    custom = replace(SETTINGS, epoch_prefix="")
    assert [t.vm_name for t in release(gcs(f"manifests/{VM}/hibernate.json"), custom)] == [VM]
    dropped = release(gcs(HIBERNATE_KEY), custom).dropped
    assert [d.reason for d in dropped] == [DropReason.NOT_A_TAG_OBJECT]
    assert Settings.from_env({}).epoch_prefix == "epoch/"
    assert Settings.from_env({"COCOON_EPOCH_PREFIX": "snap/"}).epoch_prefix == "snap/"


def test_a_registry_base_with_a_path_maps_the_repository() -> None:
    base = replace(SETTINGS, registry_base=parse_registry_base("epoch.example.com/snapshots"))
    parsed = release(gcs(f"epoch/manifests/snapshots/{VM}/hibernate.json"), base)
    assert [(t.repository, t.vm_name) for t in parsed.triggers] == [(f"snapshots/{VM}", VM)]


def test_an_s3_key_is_url_decoded_and_a_removal_is_not_a_push() -> None:
    encoded = HIBERNATE_KEY.replace("/", "%2F")
    assert [t.vm_name for t in ingest(s3(encoded))] == [VM]
    removed = ingest(s3(HIBERNATE_KEY, event="ObjectRemoved:Delete"))
    assert removed.triggers == []
    assert [d.reason for d in removed.dropped] == [DropReason.NOT_PUSH]
    rgw = ingest(s3(HIBERNATE_KEY, event="s3:ObjectCreated:Put"))  # the `s3:` spelling
    assert [t.vm_name for t in rgw] == [VM]


def test_a_malformed_record_drops_itself_not_the_batch() -> None:
    body = s3(HIBERNATE_KEY, HIBERNATE_KEY.replace(VM, "vk-team-b-agent-0"))
    del body["Records"][0]["s3"]["object"]["key"]
    parsed = ingest(body)
    assert [t.vm_name for t in parsed.triggers] == ["vk-team-b-agent-0"]
    assert [d.reason for d in parsed.dropped] == [DropReason.MALFORMED]


def test_other_storage_event_types_are_not_accepted_by_release() -> None:
    event = FakeEvent("google.cloud.storage.object.v1.deleted", gcs(HIBERNATE_KEY))
    parsed = parse_cloudevent(event, settings=SETTINGS, accept=ACCEPT_RELEASE)
    assert parsed.triggers == []
    assert [d.reason for d in parsed.dropped] == [DropReason.NOT_ACCEPTED]


COLD = r"""
import json, os, sys
os.environ.update({"COCOON_REGISTRY_BASE": "epoch.example.com", "KUBECONFIG": "/nonexistent",
                   "COCOON_INGEST_TOKEN": "cold-registry-token-0123456789abcd"})
import functions_framework
from cloudevents.http import CloudEvent, to_binary
bodies = json.loads(sys.argv[2])
statuses = []
release = functions_framework.create_app(target="release", source=sys.argv[1]).test_client()
for data in bodies["gcs"]:
    headers, body = to_binary(CloudEvent(
        {"type": "google.cloud.storage.object.v1.finalized", "source": "//storage", "id": "1"},
        data))
    statuses.append(release.post("/", headers=headers, data=body).status_code)
ingest = functions_framework.create_app(target="ingest", source=sys.argv[1]).test_client()
for data in bodies["ingest"]:
    statuses.append(ingest.post("/registry", data=json.dumps(data),
                                headers={"Authorization": "Bearer " + os.environ[
                                    "COCOON_INGEST_TOKEN"]}).status_code)
heavy = {"kubernetes", "boto3", "botocore", "google.auth", "google.cloud.pubsub"}
print(json.dumps({"statuses": statuses, "loaded": sorted(m for m in heavy if m in sys.modules)}))
"""


def test_irrelevant_bucket_objects_load_no_client_library() -> None:
    keys = [key for key, _ in IRRELEVANT]
    bodies = {
        "gcs": [gcs(key) for key in keys],
        "ingest": [s3(*keys)] + [eventbridge(key) for key in keys],
    }
    out = subprocess.run(
        [sys.executable, "-c", COLD, str(REPO_ROOT / "main.py"), json.dumps(bodies)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"statuses": [200] * len(keys) + [202] * (1 + len(keys)), "loaded": []}
