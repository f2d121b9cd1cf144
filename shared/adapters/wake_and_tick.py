"""Wake requests and sweep ticks (canonical CloudEvents, PingSource, Pub/Sub) -> triggers."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from shared.adapters.audit_events import set_event
from shared.adapters.result import Parsed
from shared.config import Settings
from shared.errors import MalformedEvent
from shared.log import clip
from shared.triggers import Source, SweepTick, WakeRequested


def parse_wake(data: Any, settings: Settings, event_id: str | None, source: Source) -> Parsed:
    make = partial(WakeRequested, source=source, event_id=event_id)
    return set_event(Parsed(kind="wake-requested", event_id=event_id), data, settings, make)


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
