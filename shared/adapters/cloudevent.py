"""CloudEvent -> triggers, for `release`, `wake` and `sweep`. Read by duck typing, so the
product never imports `cloudevents`. A type outside `accept` is dropped and acknowledged; so
is a Pub/Sub message whose effective type (`classify_pubsub`) is not accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.adapters.audit_events import parse_gke_audit, parse_knative, parse_set_changed
from shared.adapters.pubsub_messages import (
    CANONICAL_TYPES,
    classify_pubsub,
    describe_unrecognised,
    require_json,
    unwrap_pubsub,
)
from shared.adapters.push_events import (
    harbor_event_data,
    parse_artifact_registry,
    parse_snapshot_pushed,
)
from shared.adapters.result import DropReason, Parsed, as_object, from_base64, loads, show
from shared.adapters.wake_and_tick import parse_tick, parse_wake
from shared.config import Settings
from shared.constants import (
    CE_AUDIT_WRITTEN,
    CE_HARBOR_PUSHED,
    CE_KNATIVE_PING,
    CE_KNATIVE_PREFIX,
    CE_PUBSUB_PUBLISHED,
    CE_SET_CHANGED,
    CE_SNAPSHOT_PUSHED,
    CE_SWEEP_REQUESTED,
    CE_WAKE_REQUESTED,
)
from shared.errors import MalformedEvent
from shared.log import clip
from shared.triggers import Source

KNATIVE_TYPES = frozenset(
    f"{CE_KNATIVE_PREFIX}{mode}.{action}"
    for mode in ("resource", "ref")
    for action in ("add", "update", "delete")
)
_CHANGES = frozenset({CE_SET_CHANGED, CE_AUDIT_WRITTEN}) | KNATIVE_TYPES
# The types whose data `parse_parts` reads as JSON.
_DATA_TYPES = frozenset({CE_SNAPSHOT_PUSHED, CE_HARBOR_PUSHED, CE_WAKE_REQUESTED}) | _CHANGES

# What each CloudEvent target takes (docs/design.md#targets). A Pub/Sub message is admitted
# by its outer type and then by the canonical type it stands for.
ACCEPT_RELEASE = frozenset({CE_HARBOR_PUSHED, CE_SNAPSHOT_PUSHED, CE_PUBSUB_PUBLISHED}) | _CHANGES
ACCEPT_WAKE = frozenset({CE_WAKE_REQUESTED, CE_PUBSUB_PUBLISHED}) | _CHANGES
ACCEPT_SWEEP = frozenset({CE_PUBSUB_PUBLISHED, CE_KNATIVE_PING, CE_SWEEP_REQUESTED})
# What a Pub/Sub message can stand for and be parsed as (`pubsub_messages.classify_pubsub`).
PUBSUB_TYPES = CANONICAL_TYPES | {CE_AUDIT_WRITTEN}
# What a registry webhook may POST as a structured CloudEvent to `ingest /registry`.
ACCEPT_REGISTRY = frozenset({CE_HARBOR_PUSHED, CE_SNAPSHOT_PUSHED})
# What a Pub/Sub push subscription may bring to `ingest /pubsub`: people's wake
# requests and scheduler ticks. Registry and audit messages have their own
# routes; one misrouted here is refused, not acted on.
ACCEPT_PUBSUB_PUSH = frozenset({CE_PUBSUB_PUBLISHED, CE_WAKE_REQUESTED, CE_SWEEP_REQUESTED})


def parse_cloudevent(
    event: Any, *, settings: Settings, accept: frozenset[str] | None = None
) -> Parsed:
    """A functions-framework CloudEvent (duck-typed) -> triggers and drops."""
    try:
        ce_type = event["type"]
        attributes = dict(event.get_attributes())
        data = event.data
    except (KeyError, AttributeError, TypeError) as err:
        raise MalformedEvent(f"not a CloudEvent: {show(err)}") from None
    return parse_parts(ce_type, attributes, data, settings=settings, accept=accept)


def parse_structured(
    envelope: Mapping[str, Any], *, settings: Settings, accept: frozenset[str] | None
) -> Parsed:
    """A structured-mode CloudEvent already decoded from JSON (`application/cloudevents+json`)."""
    attributes = {k: v for k, v in envelope.items() if k not in ("data", "data_base64")}
    if "data_base64" in envelope:
        data: Any = from_base64(envelope["data_base64"], what="data_base64", expected="a string")
    else:
        data = envelope.get("data")
    return parse_parts(envelope.get("type"), attributes, data, settings=settings, accept=accept)


def _json(data: Any, *, what: str) -> Any:
    """CloudEvent data as JSON: the SDK hands over bytes/str when it could not decode it."""
    return loads(data, what=what) if isinstance(data, bytes | bytearray | str) else data


def parse_parts(
    ce_type: object,
    attributes: Mapping[str, Any],
    data: Any,
    *,
    settings: Settings,
    accept: frozenset[str] | None,
) -> Parsed:
    if not isinstance(ce_type, str) or not ce_type:
        raise MalformedEvent("CloudEvent without a type")
    raw_id = attributes.get("id")
    event_id = clip(raw_id) if isinstance(raw_id, str) and raw_id else None
    if accept is not None and ce_type not in accept:
        return _dropped("cloudevent", event_id, DropReason.NOT_ACCEPTED, clip(ce_type))
    if ce_type == CE_PUBSUB_PUBLISHED:
        return _parse_pubsub(data, settings=settings, accept=accept, event_id=event_id)
    if ce_type == CE_SWEEP_REQUESTED:
        tick: Any = _json(data, what=ce_type) if data not in (None, b"", "") else None
        return parse_tick(tick, event_id, Source.CANONICAL)
    if ce_type == CE_KNATIVE_PING:
        # PingSource data is whatever the user configured: a tick whatever it says.
        try:
            ping: Any = _json(data, what=ce_type) if data not in (None, b"", "") else None
        except MalformedEvent:
            ping = None
        return parse_tick(ping, event_id, Source.KNATIVE)
    if ce_type not in _DATA_TYPES:
        return _dropped("cloudevent", event_id, DropReason.UNKNOWN_TYPE, clip(ce_type))
    body = _json(data, what=ce_type)
    if ce_type == CE_SNAPSHOT_PUSHED:
        return parse_snapshot_pushed(as_object(body, what="data"), settings, event_id)
    if ce_type == CE_HARBOR_PUSHED:
        out = Parsed(kind="harbor-cloudevents", event_id=event_id)
        harbor_event_data(out, as_object(body, what="data"), settings, event_id)
        return out
    if ce_type == CE_SET_CHANGED:
        return parse_set_changed(body, settings, event_id)
    if ce_type == CE_WAKE_REQUESTED:
        return parse_wake(body, settings, event_id, Source.CANONICAL)
    if ce_type == CE_AUDIT_WRITTEN:
        return parse_gke_audit(as_object(body, what="data"), attributes, settings, event_id)
    return parse_knative(ce_type, body, attributes, settings, event_id)


def _dropped(kind: str, event_id: str | None, reason: DropReason, detail: str) -> Parsed:
    out = Parsed(kind=kind, event_id=event_id)
    out.drop(reason, detail)
    return out


def _parse_pubsub(
    data: Any, *, settings: Settings, accept: frozenset[str] | None, event_id: str | None
) -> Parsed:
    message = unwrap_pubsub(_json(data, what=CE_PUBSUB_PUBLISHED))
    event_id = message.message_id or event_id
    stands_for = classify_pubsub(message)
    if stands_for is None:
        return _dropped("pubsub", event_id, DropReason.MALFORMED, describe_unrecognised(message))
    carrying = f"Pub/Sub message carrying {stands_for}"
    if accept is not None and stands_for not in accept:
        return _dropped("pubsub", event_id, DropReason.NOT_ACCEPTED, carrying)
    if stands_for not in PUBSUB_TYPES:
        # A foreign CloudEvent (e.g. our own lifecycle events) with no accept set to refuse it.
        return _dropped("pubsub", event_id, DropReason.UNKNOWN_TYPE, carrying)
    if stands_for == CE_SNAPSHOT_PUSHED:
        body = as_object(require_json(message), what="message.data")
        if "action" in body:
            return parse_artifact_registry(body, settings, event_id)
        return parse_snapshot_pushed(body, settings, event_id)
    if stands_for == CE_AUDIT_WRITTEN:
        entry = as_object(require_json(message), what="message.data")
        return parse_gke_audit(entry, {}, settings, event_id)
    if stands_for == CE_WAKE_REQUESTED:
        return parse_wake(require_json(message), settings, event_id, Source.PUBSUB)
    if stands_for == CE_SET_CHANGED:
        return parse_set_changed(require_json(message), settings, event_id)
    return parse_tick(message.data, event_id, Source.SCHEDULER)
