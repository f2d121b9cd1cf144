"""Lifecycle CloudEvents (docs/design.md#lifecycle): pure builders, wire form, best-effort emit,
and the guarantee that this project's own adapters never read them back as work.

Pure tier: no network, no Pub/Sub library (the publisher here is a recording
object satisfying `LifecyclePublisher`; the real wrapper has its own tests).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cloudevents.http import CloudEvent, from_json

from shared import constants as k
from shared import lifecycle
from shared.adapters import (
    ACCEPT_RELEASE,
    ACCEPT_SWEEP,
    ACCEPT_WAKE,
    DropReason,
    parse_cloudevent,
    parse_pubsub_push,
)
from shared.config import Settings, parse_registry_base
from shared.errors import ConfigError, TransientError
from shared.lifecycle import LifecycleEvent, LifecycleKind
from tests.fixtures.cocoon_objects import NS, SET, make_set

NOW = datetime(2026, 3, 1, 9, 15, 2, 118000, tzinfo=UTC)
UID = "set-uid-1"


def build(kind: LifecycleKind, **set_kw: Any) -> LifecycleEvent:
    """One event of each kind from a set as its causing write returned it (rv 4711)."""
    cs = make_set(resource_version="4711", hint="node-7", **set_kw)
    if kind is LifecycleKind.RELEASED:
        return lifecycle.released(cs, deleted_pods=["agent-0"], hint="node-7", now=NOW)
    if kind is LifecycleKind.WAKING:
        return lifecycle.waking(cs, hint="node-7", now=NOW)
    if kind is LifecycleKind.WOKEN:
        return lifecycle.woken(
            cs, placement=k.PLACEMENT_POOL, node="node-9", hint="node-7", now=NOW
        )
    if kind is LifecycleKind.WAKE_NO_CAPACITY:
        return lifecycle.wake_no_capacity(
            cs,
            pod="agent-0",
            pod_uid="pod-uid-3",
            message="0/3 nodes are available: 3 Insufficient cpu.",
            now=NOW,
        )
    if kind is LifecycleKind.SEAT_RECLAIMED:
        return lifecycle.seat_reclaimed(
            cs,
            waker=f"{NS}/waker",
            pod_uid="pod-uid-3",
            idle_for=timedelta(hours=2),
            pool="default",
            now=NOW,
        )
    return lifecycle.idle_suspended(
        cs,
        idle_for=timedelta(hours=2, minutes=5),
        timeout=timedelta(minutes=30),
        last_activity=NOW - timedelta(hours=2, minutes=5),
        now=NOW,
    )


DETAILS = {
    LifecycleKind.RELEASED: {"deletedPods": ["agent-0"], "hintNode": "node-7"},
    LifecycleKind.WAKING: {"hintNode": "node-7"},
    LifecycleKind.WOKEN: {"placement": "pool", "node": "node-9", "hintNode": "node-7"},
    LifecycleKind.WAKE_NO_CAPACITY: {
        "pod": "agent-0",
        "podUid": "pod-uid-3",
        "message": "0/3 nodes are available: 3 Insufficient cpu.",
    },
    LifecycleKind.IDLE_SUSPENDED: {
        "idleSeconds": 7500,
        "idleTimeoutSeconds": 1800,
        "lastActivity": "2026-03-01T07:10:02.118Z",
    },
    LifecycleKind.SEAT_RECLAIMED: {
        "reclaimedFor": f"{NS}/waker",
        "wakePodUid": "pod-uid-3",
        "idleSeconds": 7200,
        "pool": "default",
    },
}


@pytest.mark.parametrize("kind", list(LifecycleKind), ids=[kind.value for kind in LifecycleKind])
def test_each_kind_is_a_structured_cloudevent_with_its_details(kind: LifecycleKind) -> None:
    event = build(kind).cloudevent()

    assert event["id"].startswith(f"{kind.value}:{UID}:")  # named, never the random fallback
    assert event == {
        "specversion": "1.0",
        "type": f"io.cocoonstack.hibernation.{kind.value}",
        "source": f"//cocoon-hibernation/namespaces/{NS}/cocoonsets/{SET}",
        "subject": f"{NS}/{SET}",
        "id": event["id"],
        "time": "2026-03-01T09:15:02.118Z",
        "datacontenttype": "application/json",
        "data": {"namespace": NS, "name": SET, "uid": UID, **DETAILS[kind]},
    }


@pytest.mark.parametrize(
    ("kind", "expected_id"),
    [
        (LifecycleKind.RELEASED, f"released:{UID}:4711"),
        (LifecycleKind.WAKING, f"waking:{UID}:4711"),
        (LifecycleKind.WOKEN, f"woken:{UID}:4711"),
        (LifecycleKind.IDLE_SUSPENDED, f"idle-suspended:{UID}:4711"),
    ],
    ids=["released", "waking", "woken", "idle-suspended"],
)
def test_an_id_names_the_write_that_caused_the_event(kind: LifecycleKind, expected_id: str) -> None:
    assert build(kind).id == expected_id


def test_a_no_capacity_id_names_the_situation_not_a_write() -> None:
    cs = make_set()
    first = lifecycle.wake_no_capacity(cs, pod="agent-0", pod_uid="p1", message="full", now=NOW)
    again = lifecycle.wake_no_capacity(
        make_set(resource_version="9999"), pod="agent-0", pod_uid="p1", message="full", now=NOW
    )
    other = lifecycle.wake_no_capacity(cs, pod="agent-0", pod_uid="p1", message="taint", now=NOW)
    new_pod = lifecycle.wake_no_capacity(cs, pod="agent-0", pod_uid="p2", message="full", now=NOW)

    assert first.id == again.id  # a redelivery or a re-entry: one occurrence, one id
    assert len({first.id, other.id, new_pod.id}) == 3
    assert first.id.startswith(f"wake-no-capacity:{UID}:p1:")


@pytest.mark.parametrize(
    "set_kw",
    [{"uid": ""}, {"resource_version": ""}],
    ids=["no-uid", "no-resource-version"],
)
def test_without_an_identity_the_id_is_random(
    set_kw: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "_random_id", lambda: "random-1")
    cs = make_set(**set_kw)
    event = lifecycle.waking(cs, hint="", now=NOW)
    assert event.id == "random-1"


def test_empty_hint_and_node_are_null_not_empty_strings() -> None:
    cs = make_set(hint=None)
    event = lifecycle.woken(cs, placement=k.PLACEMENT_POOL, node=None, hint="", now=NOW)
    assert event.cloudevent()["data"]["node"] is None
    assert event.cloudevent()["data"]["hintNode"] is None


def test_deleted_pods_are_listed_in_a_stable_order() -> None:
    event = lifecycle.released(make_set(), deleted_pods=["b-1", "a-0"], hint="n", now=NOW)
    assert event.cloudevent()["data"]["deletedPods"] == ["a-0", "b-1"]


@pytest.mark.parametrize("kind", list(LifecycleKind), ids=[kind.value for kind in LifecycleKind])
def test_the_message_is_structured_mode_with_mirrored_attributes(kind: LifecycleKind) -> None:
    event = build(kind)
    msg = event.message()

    assert msg.ordering_key == f"{NS}/{SET}"
    body = json.loads(msg.data)
    assert body == event.cloudevent()
    assert msg.attributes == {
        "Content-Type": "application/cloudevents+json; charset=utf-8",
        "ce-specversion": "1.0",
        "ce-type": body["type"],
        "ce-source": body["source"],
        "ce-subject": body["subject"],
        "ce-id": body["id"],
        "ce-time": body["time"],
    }
    # The body is a CloudEvent the SDK reads as such (structured JSON format).
    parsed = from_json(msg.data)
    assert parsed["type"] == body["type"] and parsed["id"] == body["id"]
    assert parsed.data == body["data"]


def test_ordering_keys_separate_sets_that_share_a_name() -> None:
    a = lifecycle.waking(make_set(namespace="team-a"), hint="", now=NOW)
    b = lifecycle.waking(make_set(namespace="team-b"), hint="", now=NOW)
    assert a.ordering_key != b.ordering_key


# --- emit: best-effort ----------------------------------------------------------------


class Recorder:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.sent: list[tuple[bytes, str, Mapping[str, str]]] = []

    def publish(self, data: bytes, *, ordering_key: str, attributes: Mapping[str, str]) -> str:
        if self.fail is not None:
            raise self.fail
        self.sent.append((data, ordering_key, dict(attributes)))
        return str(len(self.sent))


def test_emit_without_a_publisher_does_nothing() -> None:
    assert lifecycle.emit(None, build(LifecycleKind.WAKING)) is False


def test_emit_sends_the_message() -> None:
    rec = Recorder()
    event = build(LifecycleKind.WOKEN)
    assert lifecycle.emit(rec, event) is True
    assert rec.sent == [
        (event.message().data, event.ordering_key, dict(event.message().attributes))
    ]


@pytest.mark.parametrize(
    "error",
    [TransientError("unavailable"), ConfigError("topic does not exist")],
    ids=["transient", "config"],
)
def test_a_failed_publish_is_a_warning_not_an_error(
    error: Exception, capsys: pytest.CaptureFixture[str]
) -> None:
    event = build(LifecycleKind.RELEASED)

    assert lifecycle.emit(Recorder(fail=error), event) is False

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    warning = next(r for r in lines if r.get("message") == "lifecycle event not published")
    assert warning["severity"] == "WARNING"
    assert warning["event_id"] == event.id
    assert warning["error_type"] == type(error).__name__


def test_a_bug_in_the_publisher_is_not_swallowed() -> None:
    # Best-effort covers the publisher's typed failures, not programming errors.
    with pytest.raises(TypeError):
        lifecycle.emit(Recorder(fail=TypeError("bug")), build(LifecycleKind.WAKING))


# --- the default publisher ------------------------------------------------------------


def test_no_topic_no_publisher() -> None:
    assert lifecycle.resolve_publisher(lifecycle.FROM_SETTINGS, Settings()) is None
    assert lifecycle.resolve_publisher(lifecycle.FROM_SETTINGS, None) is None


def test_an_explicit_publisher_wins_over_settings() -> None:
    rec = Recorder()
    topic = Settings(events_topic="projects/p/topics/t")
    assert lifecycle.resolve_publisher(rec, topic) is rec
    assert lifecycle.resolve_publisher(None, topic) is None


def test_the_topic_gives_the_process_publisher_once() -> None:
    from shared.clients import pubsub

    settings = Settings(events_topic="projects/p/topics/lifecycle-unit")
    try:
        first = lifecycle.resolve_publisher(lifecycle.FROM_SETTINGS, settings)
        second = lifecycle.resolve_publisher(lifecycle.FROM_SETTINGS, settings)
        assert isinstance(first, pubsub.PubSubPublisher)
        assert first is second
        assert first.topic == "projects/p/topics/lifecycle-unit"
        assert not first.library_loaded  # nothing built before the first publish
    finally:
        pubsub.reset_clients()


# --- wired back to a function: never mistaken for work ----------------------------------


def adapter_settings() -> Settings:
    return Settings(registry_base=parse_registry_base("127.0.0.1:5000/cocoon"))


def eventarc(attributes: Mapping[str, str], data: bytes) -> CloudEvent:
    """What Eventarc delivers for a message on the topic (`messagePublished`)."""
    return CloudEvent(
        {
            "type": k.CE_PUBSUB_PUBLISHED,
            "source": "//pubsub.googleapis.com/projects/p/topics/cocoon-lifecycle",
            "id": "m-1",
        },
        {
            "message": {
                "data": base64.b64encode(data).decode(),
                "attributes": dict(attributes),
                "messageId": "m-1",
            },
            "subscription": "projects/p/subscriptions/s",
        },
    )


def as_published(event: LifecycleEvent) -> tuple[Mapping[str, str], bytes]:
    msg = event.message()
    return msg.attributes, msg.data


def data_only(event: LifecycleEvent) -> tuple[Mapping[str, str], bytes]:
    # A hop that keeps the data and drops the attributes (a re-publish, a sink).
    return {}, event.message().data


def binary_mode(event: LifecycleEvent) -> tuple[Mapping[str, str], bytes]:
    # Someone re-encoding it in binary mode: the data alone is {"namespace", "name", ...}.
    body = event.cloudevent()
    attrs = {f"ce-{key}": str(v) for key, v in body.items() if key != "data"}
    return attrs, json.dumps(body["data"]).encode()


ENCODINGS: list[Callable[[LifecycleEvent], tuple[Mapping[str, str], bytes]]] = [
    as_published,
    data_only,
    binary_mode,
]
ACCEPTS = {"release": ACCEPT_RELEASE, "wake": ACCEPT_WAKE, "sweep": ACCEPT_SWEEP, "any": None}


@pytest.mark.parametrize("encoding", ENCODINGS, ids=[f.__name__ for f in ENCODINGS])
@pytest.mark.parametrize("target", list(ACCEPTS), ids=list(ACCEPTS))
@pytest.mark.parametrize("kind", list(LifecycleKind), ids=[kind.value for kind in LifecycleKind])
def test_a_lifecycle_event_is_neither_a_wake_request_nor_a_tick(
    kind: LifecycleKind,
    target: str,
    encoding: Callable[[LifecycleEvent], tuple[Mapping[str, str], bytes]],
) -> None:
    attributes, data = encoding(build(kind))

    parsed = parse_cloudevent(
        eventarc(attributes, data), settings=adapter_settings(), accept=ACCEPTS[target]
    )

    assert parsed.triggers == []
    expected = DropReason.UNKNOWN_TYPE if target == "any" else DropReason.NOT_ACCEPTED
    assert [d.reason for d in parsed.dropped] == [expected]
    assert kind.ce_type in parsed.dropped[0].detail


@pytest.mark.parametrize("kind", list(LifecycleKind), ids=[kind.value for kind in LifecycleKind])
def test_a_push_subscription_to_ingest_drops_it_too(kind: LifecycleKind) -> None:
    attributes, data = as_published(build(kind))
    body = {
        "message": {"data": base64.b64encode(data).decode(), "attributes": dict(attributes)},
        "subscription": "projects/p/subscriptions/push",
    }

    parsed = parse_pubsub_push(json.dumps(body).encode(), adapter_settings())

    assert parsed.triggers == []
    assert [d.reason for d in parsed.dropped] == [DropReason.UNKNOWN_TYPE]


def test_a_structured_wake_request_is_still_not_mistaken_for_a_foreign_event() -> None:
    # The foreign-CloudEvent rule is about other types: canonical messages keep
    # their meaning (a plain wake request still wakes).
    data = json.dumps({"namespace": NS, "name": SET}).encode()
    parsed = parse_cloudevent(
        eventarc({"ce-type": k.CE_WAKE_REQUESTED}, data),
        settings=adapter_settings(),
        accept=ACCEPT_WAKE,
    )
    assert [type(t).__name__ for t in parsed.triggers] == ["WakeRequested"]
