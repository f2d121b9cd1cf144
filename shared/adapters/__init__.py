"""Event adapters: every event source in, the trigger shapes of `shared.triggers` out.

Pure (no network, no client), so a target acknowledges an irrelevant event before it
builds any client.
"""

from __future__ import annotations

from shared.adapters.audit_events import parse_audit_eventlist
from shared.adapters.cloudevent import (
    ACCEPT_PUBSUB_PUSH,
    ACCEPT_REGISTRY,
    ACCEPT_RELEASE,
    ACCEPT_SWEEP,
    ACCEPT_WAKE,
    parse_cloudevent,
)
from shared.adapters.http import parse_pubsub_push, parse_registry_webhook
from shared.adapters.result import Drop, DropReason, Parsed

__all__ = [
    "ACCEPT_PUBSUB_PUSH",
    "ACCEPT_REGISTRY",
    "ACCEPT_RELEASE",
    "ACCEPT_SWEEP",
    "ACCEPT_WAKE",
    "Drop",
    "DropReason",
    "Parsed",
    "parse_audit_eventlist",
    "parse_cloudevent",
    "parse_pubsub_push",
    "parse_registry_webhook",
]
