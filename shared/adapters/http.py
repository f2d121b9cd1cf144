"""Bodies POSTed to `ingest` -> triggers; the body's shape decides the format, not Content-Type.

`/registry`: Distribution, Harbor (both formats) or ECR EventBridge; `/kubernetes/audit`:
an audit `EventList`; `/pubsub`: a push envelope with a wake request or a sweep tick.
"""

from __future__ import annotations

from shared.adapters.cloudevent import ACCEPT_REGISTRY, parse_parts, parse_structured
from shared.adapters.push_events import parse_distribution, parse_ecr, parse_harbor_default
from shared.adapters.result import Parsed, as_object, loads, show
from shared.config import Settings
from shared.constants import CE_PUBSUB_PUBLISHED
from shared.errors import MalformedEvent
from shared.log import clip


def parse_registry_webhook(body: bytes, content_type: str | None, settings: Settings) -> Parsed:
    envelope = as_object(loads(body, what="registry notification"), what="registry notification")
    if "events" in envelope:
        return parse_distribution(envelope, settings)
    if "specversion" in envelope:
        return parse_structured(envelope, settings=settings, accept=ACCEPT_REGISTRY)
    if "detail-type" in envelope:
        return parse_ecr(envelope, settings)
    if "event_data" in envelope and "type" in envelope:
        return parse_harbor_default(envelope, settings)
    raise MalformedEvent(
        f"unrecognised registry notification (Content-Type {show(content_type)!r}, "
        f"keys {clip(', '.join(sorted(map(str, envelope))))})"
    )


def parse_pubsub_push(
    body: bytes, settings: Settings, accept: frozenset[str] | None = None
) -> Parsed:
    """A Pub/Sub push subscription's wrapped body (no Eventarc in between)."""
    envelope = loads(body, what="Pub/Sub push")
    return parse_parts(CE_PUBSUB_PUBLISHED, {}, envelope, settings=settings, accept=accept)
