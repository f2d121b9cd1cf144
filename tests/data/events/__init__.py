"""Recorded event fixtures, one JSON file per source and case (docs/design.md#event-sources).

HTTP bodies (Distribution, Harbor, ECR, audit EventList) are stored as the
body itself; CloudEvents as `{"attributes": {...}, "data": ...}` so a test can
encode them with the real SDK in binary or structured mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVENTS_DIR = Path(__file__).resolve().parent


def load_event(name: str) -> Any:
    """The decoded JSON of `tests/data/events/<name>.json`."""
    return json.loads((EVENTS_DIR / f"{name}.json").read_text())


def event_bytes(name: str) -> bytes:
    """The fixture's body as bytes (what an HTTP producer would POST)."""
    return (EVENTS_DIR / f"{name}.json").read_bytes()


def cloudevent(name: str) -> Any:
    """A `cloudevents.http.CloudEvent` built from a CloudEvent fixture."""
    from cloudevents.http import CloudEvent

    fixture = load_event(name)
    return CloudEvent(dict(fixture["attributes"]), fixture["data"])


def all_names() -> list[str]:
    return sorted(p.stem for p in EVENTS_DIR.glob("*.json"))
