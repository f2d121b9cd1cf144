"""Event adapters: every event source in, the few trigger shapes of `shared.triggers` out.

Pure functions (no network, no clients): they decode an envelope, validate
every name in it, and drop what cannot matter with a reason, so the targets
can acknowledge irrelevant events before building any client.

Entries:
- `parse_cloudevent(event, settings=, accept=)` for the CloudEvent targets;
- `parse_registry_webhook`, `parse_audit_eventlist`, `parse_pubsub_push` for
  the HTTP `ingest` target.
"""

from __future__ import annotations

from shared.adapters.cloudevent import (
    ACCEPT_PUBSUB_PUSH,
    ACCEPT_REGISTRY,
    ACCEPT_RELEASE,
    ACCEPT_SWEEP,
    ACCEPT_WAKE,
    parse_cloudevent,
)
from shared.adapters.http import parse_audit_eventlist, parse_pubsub_push, parse_registry_webhook
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
