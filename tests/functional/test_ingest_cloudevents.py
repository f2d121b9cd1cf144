"""CloudEvent adapters driven through the framework with the real SDK encoders.

Each recorded CloudEvent fixture is encoded with `cloudevents.http.to_binary`
and `to_structured`, POSTed to a `@cloud_event` function served by
`functions_framework.create_app(...).test_client()`, and decoded by the
framework into the `CloudEvent` the adapter reads: the same path Eventarc,
Knative and Harbor deliveries take.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import functions_framework
import pytest
from cloudevents.http import CloudEvent, to_binary, to_structured

from shared.adapters import ACCEPT_RELEASE, ACCEPT_SWEEP, ACCEPT_WAKE, DropReason, Parsed
from shared.config import RegistryBase, Settings
from shared.errors import InvalidName
from shared.names import SetRef
from shared.triggers import SetChanged, SnapshotPushed, Source, SweepTick, WakeRequested
from tests.data.events import cloudevent

PROBE = Path(__file__).with_name("ce_probe.py")
VM = "vk-team-a-agent-0"
DIGEST = "sha256:3f5e9a" + "0" * 55 + "e21"
AGENT = SetRef("team-a", "agent")
LOCAL = Settings(registry_base=RegistryBase("127.0.0.1:5000", "cocoon"))
AR = Settings(registry_base=RegistryBase("europe-west1-docker.pkg.dev", "acme-prod/cocoon"))


@pytest.fixture
def probe() -> Iterator[tuple[Any, Any]]:
    app = functions_framework.create_app(target="probe", source=str(PROBE))
    state = sys.modules["ce_probe"].Probe
    state.results = []
    yield app.test_client(), state


CASES = [
    pytest.param(
        "ar_insert_hibernate",
        AR,
        ACCEPT_RELEASE,
        [
            SnapshotPushed(
                f"acme-prod/cocoon/{VM}", "hibernate", DIGEST, Source.ARTIFACT_REGISTRY, VM
            )
        ],
        [],
        id="artifact-registry",
    ),
    pytest.param(
        "ar_insert_untagged", AR, ACCEPT_RELEASE, [], [DropReason.UNTAGGED], id="ar-untagged"
    ),
    pytest.param(
        "gke_audit_cocoonset_patch",
        LOCAL,
        ACCEPT_RELEASE,
        [SetChanged(AGENT, "cocoonsets.patch", Source.GKE_AUDIT)],
        [],
        id="gke-audit",
    ),
    pytest.param(
        "gke_audit_lease_update", LOCAL, ACCEPT_WAKE, [], [DropReason.RESOURCE], id="gke-lease"
    ),
    pytest.param(
        "knative_resource_pod_update",
        LOCAL,
        ACCEPT_WAKE,
        [SetChanged(AGENT, "pods.update", Source.KNATIVE)],
        [],
        id="knative-resource",
    ),
    pytest.param(
        "knative_ref_cocoonset_delete",
        LOCAL,
        ACCEPT_RELEASE,
        [SetChanged(AGENT, "cocoonsets.delete", Source.KNATIVE)],
        [],
        id="knative-ref",
    ),
    pytest.param(
        "wake_requested",
        LOCAL,
        ACCEPT_WAKE,
        [WakeRequested(AGENT, Source.CANONICAL)],
        [],
        id="wake",
    ),
    pytest.param(
        "wake_pubsub",
        LOCAL,
        ACCEPT_WAKE,
        [WakeRequested(AGENT, Source.PUBSUB)],
        [],
        id="wake-pubsub",
    ),
    pytest.param(
        "wake_requested", LOCAL, ACCEPT_SWEEP, [], [DropReason.NOT_ACCEPTED], id="wake-to-sweep"
    ),
    pytest.param(
        "scheduler_pubsub",
        LOCAL,
        ACCEPT_SWEEP,
        [SweepTick(False, Source.SCHEDULER)],
        [],
        id="scheduler",
    ),
    pytest.param(
        "knative_ping", LOCAL, ACCEPT_SWEEP, [SweepTick(True, Source.KNATIVE)], [], id="ping"
    ),
    pytest.param(
        "sweep_requested", LOCAL, ACCEPT_SWEEP, [SweepTick(True, Source.CANONICAL)], [], id="sweep"
    ),
    pytest.param(
        "snapshot_pushed",
        LOCAL,
        ACCEPT_RELEASE,
        [SnapshotPushed(f"cocoon/{VM}", "hibernate", DIGEST, Source.CANONICAL, VM)],
        [],
        id="snapshot-pushed",
    ),
    pytest.param(
        "set_changed",
        LOCAL,
        ACCEPT_WAKE,
        [SetChanged(AGENT, "cocoonset.changed", Source.CANONICAL)],
        [],
        id="set-changed",
    ),
]


@pytest.mark.parametrize("mode", ["binary", "structured"])
@pytest.mark.parametrize(("fixture", "settings", "accept", "triggers", "dropped"), CASES)
def test_cloudevent_through_the_framework(
    probe: tuple[Any, Any],
    *,
    mode: str,
    fixture: str,
    settings: Settings,
    accept: frozenset[str],
    triggers: list[Any],
    dropped: list[DropReason],
) -> None:
    client, state = probe
    state.settings, state.accept = settings, accept
    headers, body = (to_binary if mode == "binary" else to_structured)(cloudevent(fixture))
    response = client.post("/", data=body, headers=headers)
    assert response.status_code == 200
    [parsed] = state.results
    assert isinstance(parsed, Parsed)
    assert parsed.triggers == triggers
    assert [d.reason for d in parsed.dropped] == dropped
    # The correlation id survives the encoding (the CloudEvent id or the Pub/Sub messageId).
    assert parsed.event_id


def test_harbor_cloudevents_webhook_as_harbor_posts_it(probe: tuple[Any, Any]) -> None:
    """Harbor posts structured `application/cloudevents+json` (docs/design.md#harbor)."""
    client, state = probe
    state.settings, state.accept = LOCAL, ACCEPT_RELEASE
    body = (
        Path(__file__).parents[1] / "data" / "events" / "harbor_cloudevent_push.json"
    ).read_bytes()
    response = client.post("/", data=body, headers={"Content-Type": "application/cloudevents+json"})
    assert response.status_code == 200
    [parsed] = state.results
    assert parsed.triggers == [
        SnapshotPushed(f"cocoon/{VM}", "hibernate", DIGEST, Source.HARBOR, VM)
    ]


def test_invalid_name_raises_the_typed_error(probe: tuple[Any, Any]) -> None:
    client, state = probe
    state.settings, state.accept = LOCAL, ACCEPT_WAKE
    event = CloudEvent(
        {"type": "io.cocoonstack.cocoonset.wake.requested", "source": "/test"},
        {"namespace": "team-a%2F..", "name": "agent"},
    )
    headers, body = to_binary(event)
    client.post("/", data=body, headers=headers)
    [result] = state.results
    assert isinstance(result, InvalidName)
