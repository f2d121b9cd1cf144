"""The Pub/Sub envelope: unwrap a message, decide which canonical type it stands for (a
`type` attribute, else its data's shape). A message declaring another CloudEvent type (our
own lifecycle events, whose data would pass for a tick or a wake) is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.adapters.result import as_object, event_id_of, from_base64, loads, opt_object
from shared.constants import (
    CE_AUDIT_WRITTEN,
    CE_LIFECYCLE_PREFIX,
    CE_SET_CHANGED,
    CE_SNAPSHOT_PUSHED,
    CE_SWEEP_REQUESTED,
    CE_WAKE_REQUESTED,
)
from shared.errors import MalformedEvent
from shared.log import clip

# Publishers may name the canonical type in a message attribute.
TYPE_ATTRIBUTES = ("type", "ce-type", "ce_type")
CANONICAL_TYPES = frozenset(
    {CE_SNAPSHOT_PUSHED, CE_SET_CHANGED, CE_WAKE_REQUESTED, CE_SWEEP_REQUESTED}
)


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
    raw = b""
    if (encoded := message.get("data")) is not None:
        raw = from_base64(encoded, what="message.data", expected="a base64 string")
    data: Any = None
    if raw.strip():
        try:
            data = loads(raw, what="message.data")
        except MalformedEvent:
            data = None  # a scheduler may send any bytes: a tick need not be JSON
    return PubSubMessage(event_id_of(message, "messageId", "message_id"), attrs, raw, data)


def _foreign_cloudevent(message: PubSubMessage) -> str | None:
    """The type of a message that declares itself a non-canonical CloudEvent, else None."""
    for key in TYPE_ATTRIBUTES:
        declared = message.attributes.get(key)
        if declared and declared.startswith(CE_LIFECYCLE_PREFIX):
            return declared
    data = message.data
    if not isinstance(data, Mapping):
        return None
    content_type = next(
        (v for k, v in message.attributes.items() if k.lower() == "content-type"), ""
    )
    if "specversion" in data or content_type.lower().startswith("application/cloudevents"):
        inner = data.get("type")
        if isinstance(inner, str) and inner and inner not in CANONICAL_TYPES:
            return clip(inner)
    return None


def classify_pubsub(message: PubSubMessage) -> str | None:
    """The type a Pub/Sub message stands for (canonical, or a foreign CloudEvent's), None if
    unrecognisable. A sweep may suspend every set, so a tick must look like one (`is_tick`),
    never be what is left when nothing else matched."""
    for key in TYPE_ATTRIBUTES:
        declared = message.attributes.get(key)
        if declared in CANONICAL_TYPES or declared == CE_AUDIT_WRITTEN:
            return declared
    foreign = _foreign_cloudevent(message)
    if foreign is not None:
        return foreign
    data = message.data
    if isinstance(data, Mapping):
        if "protoPayload" in data:
            return CE_AUDIT_WRITTEN  # a Cloud Logging sink to Pub/Sub
        if "action" in data and ("digest" in data or "tag" in data):
            return CE_SNAPSHOT_PUSHED  # Artifact Registry's `gcr` topic
        if "namespace" in data and "name" in data:
            return CE_WAKE_REQUESTED
    return CE_SWEEP_REQUESTED if is_tick(message) else None


def is_tick(message: PubSubMessage) -> bool:
    """Empty data, data of nothing but `dryRun`/`dry_run` (the Terraform job's
    `{"dryRun": false}`), or any data under the attribute `origin=scheduler`: Cloud Scheduler
    adds no attribute of its own, so that is the convention for free-form jobs."""
    if message.attributes.get("origin") == "scheduler" or not message.raw.strip():
        return True
    return isinstance(message.data, Mapping) and set(message.data) <= {"dryRun", "dry_run"}


def describe_unrecognised(message: PubSubMessage) -> str:
    """A drop detail for a message nothing recognises: its shape, never its values."""
    data = message.data
    if isinstance(data, Mapping):
        shape = f"data keys {', '.join(sorted(map(str, data)))}"
    elif data is None:
        shape = f"{len(message.raw)} bytes of non-JSON data"
    else:
        shape = f"data of JSON type {type(data).__name__}"
    attrs = ", ".join(sorted(message.attributes)) or "none"
    return clip(
        f"Pub/Sub message is no wake request, snapshot, audit entry or sweep tick "
        f"({shape}; attributes: {attrs})"
    )


def require_json(message: PubSubMessage) -> Any:
    if message.data is None:
        raise MalformedEvent(f"message.data is not JSON: {clip(repr(message.raw[:64]))}")
    return message.data
