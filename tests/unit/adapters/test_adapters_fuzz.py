"""Fuzzing the adapters: whatever arrives, only `MalformedEvent`/`InvalidName` may escape.

Anything else escaping an adapter would become a 500 at the target, and for a
Distribution registry a 500 is retried forever while its queue stalls.
"""

from __future__ import annotations

import json
from typing import Any

from cloudevents.http import CloudEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.adapters import (
    ACCEPT_RELEASE,
    ACCEPT_SWEEP,
    ACCEPT_WAKE,
    Parsed,
    parse_audit_eventlist,
    parse_cloudevent,
    parse_pubsub_push,
    parse_registry_webhook,
)
from shared.config import RegistryBase, Settings
from shared.errors import InvalidName, MalformedEvent
from shared.triggers import SetChanged, SnapshotPushed, SweepTick, WakeRequested
from tests.data.events import all_names, load_event

SETTINGS = Settings(
    registry_base=RegistryBase("127.0.0.1:5000", "cocoon"),
    namespaces=frozenset({"team-a", "team-b"}),
)
ALLOWED = (MalformedEvent, InvalidName)
TRIGGERS = (SnapshotPushed, SetChanged, WakeRequested, SweepTick)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(["push", "hibernate", "INSERT", "PUSH", "ResponseComplete", "patch"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=10)
            | st.sampled_from(
                ["events", "target", "tag", "repository", "items", "message", "data"]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)

HTTP_FIXTURES = [
    n
    for n in all_names()
    if n.startswith(("distribution", "harbor_default", "ecr", "audit", "harbor_cloudevent"))
]
CE_FIXTURES = [n for n in all_names() if n not in HTTP_FIXTURES]


def _check(parse: Any, *args: Any, **kw: Any) -> None:
    try:
        parsed = parse(*args, **kw)
    except ALLOWED:
        return
    assert isinstance(parsed, Parsed)
    assert all(isinstance(t, TRIGGERS) for t in parsed.triggers)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """The value with one subtree (chosen along a random path) replaced by arbitrary JSON."""
    if not isinstance(value, dict | list) or not value or draw(st.integers(0, 3)) == 0:
        return draw(json_values)
    if isinstance(value, dict):
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: draw(mutated(value[key]))}
    i = draw(st.integers(0, len(value) - 1))
    return [*value[:i], draw(mutated(value[i])), *value[i + 1 :]]


ENTRIES = [
    lambda body: parse_registry_webhook(body, "application/json", SETTINGS),
    lambda body: parse_audit_eventlist(body, SETTINGS),
    lambda body: parse_pubsub_push(body, SETTINGS),
]


@given(body=st.binary(max_size=200), entry=st.sampled_from(ENTRIES))
def test_arbitrary_bytes(body: bytes, entry: Any) -> None:
    _check(entry, body)


@given(value=json_values, entry=st.sampled_from(ENTRIES))
def test_arbitrary_json(value: Any, entry: Any) -> None:
    _check(entry, json.dumps(value).encode())


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(data=st.data(), name=st.sampled_from(HTTP_FIXTURES), entry=st.sampled_from(ENTRIES))
def test_mutated_http_fixtures(data: st.DataObject, name: str, entry: Any) -> None:
    body = data.draw(mutated(load_event(name)))
    _check(entry, json.dumps(body).encode())


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(
    data=st.data(),
    name=st.sampled_from(CE_FIXTURES),
    accept=st.sampled_from([None, ACCEPT_RELEASE, ACCEPT_WAKE, ACCEPT_SWEEP]),
)
def test_mutated_cloudevents(data: st.DataObject, name: str, accept: frozenset[str] | None) -> None:
    fixture = load_event(name)
    event_data = data.draw(mutated(fixture["data"]))
    attrs = dict(fixture["attributes"])
    if data.draw(st.booleans()):
        # Extensions too: the GKE adapter reads methodname/resourcename from them.
        key = data.draw(st.sampled_from(sorted(attrs)))
        if key not in ("type", "source", "specversion"):
            attrs[key] = data.draw(st.text(max_size=30))
    _check(parse_cloudevent, CloudEvent(attrs, event_data), settings=SETTINGS, accept=accept)


@given(
    ce_type=st.text(max_size=40)
    | st.sampled_from(
        [
            "google.cloud.pubsub.topic.v1.messagePublished",
            "google.cloud.audit.log.v1.written",
            "dev.knative.apiserver.resource.add",
            "dev.knative.apiserver.ref.update",
            "io.cocoonstack.cocoonset.wake.requested",
            "io.cocoonstack.sweep.requested",
            "harbor.artifact.pushed",
        ]
    ),
    event_data=json_values | st.binary(max_size=50),
)
def test_arbitrary_cloudevent_data(ce_type: str, event_data: Any) -> None:
    if not ce_type:
        ce_type = "x"
    event = CloudEvent({"type": ce_type, "source": "/fuzz"}, event_data)
    _check(parse_cloudevent, event, settings=SETTINGS, accept=None)
