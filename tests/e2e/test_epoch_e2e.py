"""epoch's bucket events drive a release end to end (functions-framework, the API, a registry).

epoch stores the tag `<repo>:hibernate` as the object
`<prefix>manifests/<repo>/hibernate.json`; its bucket's "object created" event is the
push event (docs/epoch.md). Each payload is the public sample in
../shared/reference/payloads/ with only the bucket and the object name adapted. The
registry the gate asks is a real Distribution server standing in for epoch (the same
HEAD by tag; epoch itself is not buildable here).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from cloudevents.http import CloudEvent, to_binary

from shared import constants as k
from tests.conftest import REFERENCE_DIR, needs_reference
from tests.e2e.test_release_e2e import gone_or_terminating, hibernated_main, suspended_set
from tests.fixtures.cocoon_objects import NS, SET, VM0
from tests.fixtures.reconcile_world import World

pytestmark = [pytest.mark.e2e, needs_reference]

TOKEN = "epoch-e2e-registry-token-0123456789"  # a local test credential
BUCKET = "epoch-bucket"


def sample(name: str) -> dict[str, Any]:
    assert REFERENCE_DIR is not None
    data: dict[str, Any] = json.loads((REFERENCE_DIR / "payloads" / name).read_text())
    return data


def key(world: World, leaf: str = "hibernate.json", vm: str = VM0) -> str:
    # The repository under COCOON_REGISTRY_BASE (`<host>/<prefix>`) is `<prefix>/<vm>`.
    return f"epoch/manifests/{world.prefix}/{vm}/{leaf}"


def gcs_event(object_key: str) -> CloudEvent:
    data = sample("gcs-storage-object-data.json")
    data["bucket"], data["name"] = BUCKET, object_key
    return CloudEvent(
        {
            "type": k.CE_GCS_FINALIZED,
            "source": f"//storage.googleapis.com/projects/_/buckets/{BUCKET}",
            "subject": f"objects/{object_key}",
            "id": "gcs-finalize-1",
        },
        data,
    )


def s3_body(*object_keys: str) -> dict[str, Any]:
    envelope = sample("s3-event-notification.json")
    template = envelope["Records"][0]
    records = []
    for object_key in object_keys:
        record = copy.deepcopy(template)
        record["s3"]["bucket"]["name"] = BUCKET
        record["s3"]["object"]["key"] = object_key
        records.append(record)
    envelope["Records"] = records
    return envelope


def eventbridge_body(object_key: str) -> dict[str, Any]:
    event = sample("eventbridge-s3-object-created.json")
    event["detail"]["bucket"]["name"] = BUCKET
    event["detail"]["object"]["key"] = object_key
    return event


@pytest.fixture
def ingest(function_app: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("COCOON_INGEST_TOKEN", TOKEN)
    client = function_app("ingest")

    def post(body: dict[str, Any]) -> Any:
        return client.post(
            "/registry",
            data=json.dumps(body),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )

    return post


def ready_to_release(world: World) -> None:
    cs = suspended_set(world)
    hibernated_main(world, cs)
    world.push_snapshot(VM0)


def test_a_gcs_finalize_of_the_tag_object_releases(world: World, function_app: Any) -> None:
    ready_to_release(world)
    release = function_app("release")
    # The by-digest copy and the catalog come with the same push: acknowledged, nothing done.
    for leaf in (f"_digests/sha256-{'e' * 64}.json", "latest.json"):
        headers, body = to_binary(gcs_event(key(world, leaf)))
        assert release.post("/", headers=headers, data=body).status_code == 200
    headers, body = to_binary(gcs_event("epoch/catalog.json"))
    assert release.post("/", headers=headers, data=body).status_code == 200
    assert not gone_or_terminating(world)

    headers, body = to_binary(gcs_event(key(world)))
    assert release.post("/", headers=headers, data=body).status_code == 200
    assert gone_or_terminating(world)
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


def test_an_s3_notification_of_one_whole_push_releases(world: World, ingest: Any) -> None:
    ready_to_release(world)
    # The objects of one epoch push, in epoch's order (blobs, digest copy, tag, catalog).
    body = s3_body(
        f"epoch/blobs/sha256/{'f' * 64}",
        key(world, f"_digests/sha256-{'a' * 64}.json"),
        key(world),
        "epoch/catalog.json",
    )
    reply = ingest(body)
    assert reply.status_code == 202
    assert reply.get_json() == {"accepted": 1, "dropped": 3}
    assert gone_or_terminating(world)
    assert world.get_set(NS, SET)["status"]["phase"] == "Suspended"


def test_an_eventbridge_object_created_releases(world: World, ingest: Any) -> None:
    ready_to_release(world)
    reply = ingest(eventbridge_body(key(world, "_digests/sha256-" + "b" * 64 + ".json")))
    assert reply.status_code == 202 and reply.get_json() == {"accepted": 0, "dropped": 1}
    assert not gone_or_terminating(world)
    reply = ingest(eventbridge_body(key(world)))
    assert reply.status_code == 202 and reply.get_json() == {"accepted": 1, "dropped": 0}
    assert gone_or_terminating(world)
