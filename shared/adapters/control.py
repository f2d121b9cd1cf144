"""Requests from people and clocks: wake requests and sweep ticks, and the Pub/Sub envelope.

A Pub/Sub message carries no type of its own: Artifact Registry, a log sink,
Cloud Scheduler and a wake publisher all arrive as
`google.cloud.pubsub.topic.v1.messagePublished`. The message is classified by
an explicit `type` attribute when the publisher set one, else by its decoded
data, into the canonical type it stands for; the target's `accept` set is then
checked against that effective type too (so a scheduler tick sent to
`release` is refused rather than run as a sweep).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.adapters.kube import set_ref
from shared.adapters.result import (
    DropReason,
    Parsed,
    as_object,
    clip,
    event_id_of,
    loads,
    opt_object,
)
from shared.config import Settings
from shared.constants import (
    CE_AUDIT_WRITTEN,
    CE_SET_CHANGED,
    CE_SNAPSHOT_PUSHED,
    CE_SWEEP_REQUESTED,
    CE_WAKE_REQUESTED,
)
from shared.errors import MalformedEvent
from shared.triggers import Source, SweepTick, WakeRequested

# Publishers may name the canonical type in a message attribute.
TYPE_ATTRIBUTES = ("type", "ce-type", "ce_type")
CANONICAL_TYPES = frozenset(
    {CE_SNAPSHOT_PUSHED, CE_SET_CHANGED, CE_WAKE_REQUESTED, CE_SWEEP_REQUESTED}
)


def parse_wake(data: Any, settings: Settings, event_id: str | None, source: Source) -> Parsed:
    out = Parsed(kind="wake-requested", event_id=event_id)
    ref = set_ref(data)
    if not settings.namespace_allowed(ref.namespace):
        out.drop(DropReason.NAMESPACE, str(ref))
        return out
    out.add(WakeRequested(ref, source, event_id=event_id))
    return out


def dry_run_of(data: Any) -> bool:
    """`{"dryRun": bool}` (also `dry_run`); any other payload is a plain tick."""
    if not isinstance(data, Mapping):
        return False
    for key in ("dryRun", "dry_run"):
        if key in data:
            value = data[key]
            if not isinstance(value, bool):
                raise MalformedEvent(f"{key} must be a boolean, got {clip(repr(value))}")
            return value
    return False


def parse_tick(data: Any, event_id: str | None, source: Source) -> Parsed:
    out = Parsed(kind="sweep-tick", event_id=event_id)
    out.add(SweepTick(dry_run_of(data), source, event_id=event_id))
    return out


# --- Pub/Sub ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PubSubMessage:
    message_id: str | None
    attributes: Mapping[str, str]
    raw: bytes
    data: Any  # decoded JSON, or None when the data is empty or not JSON


def unwrap_pubsub(envelope: Any) -> PubSubMessage:
    """`{"message": {"data": <base64>, "attributes", "messageId"}, "subscription"}`."""
    body = as_object(envelope, what="Pub/Sub envelope")
    message = as_object(body.get("message"), what="message")
    attributes = opt_object(message, "attributes") or {}
    attrs = {str(k): v for k, v in attributes.items() if isinstance(v, str)}
    encoded = message.get("data")
    raw = b""
    if encoded is not None:
        if not isinstance(encoded, str):
            raise MalformedEvent("message.data must be a base64 string")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as err:
            raise MalformedEvent(f"message.data is not base64: {err}") from None
    data: Any = None
    if raw.strip():
        try:
            data = loads(raw, what="message.data")
        except MalformedEvent:
            data = None  # a scheduler may send any bytes: a tick need not be JSON
    return PubSubMessage(
        message_id=event_id_of(message, "messageId", "message_id"),
        attributes=attrs,
        raw=raw,
        data=data,
    )


def classify_pubsub(message: PubSubMessage) -> str:
    """The canonical CloudEvent type a Pub/Sub message stands for."""
    for key in TYPE_ATTRIBUTES:
        declared = message.attributes.get(key)
        if declared in CANONICAL_TYPES or declared == CE_AUDIT_WRITTEN:
            return declared
    data = message.data
    if isinstance(data, Mapping):
        if "protoPayload" in data:
            return CE_AUDIT_WRITTEN  # a Cloud Logging sink to Pub/Sub
        if "action" in data and ("digest" in data or "tag" in data):
            return CE_SNAPSHOT_PUSHED  # Artifact Registry's `gcr` topic
        if "namespace" in data and "name" in data:
            return CE_WAKE_REQUESTED
    return CE_SWEEP_REQUESTED  # Cloud Scheduler: the message itself is the tick


def require_json(message: PubSubMessage) -> Any:
    if message.data is None:
        raise MalformedEvent(f"message.data is not JSON: {clip(repr(message.raw[:64]))}")
    return message.data
