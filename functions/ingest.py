"""The HTTP `ingest` target: webhooks that are not CloudEvents."""

from __future__ import annotations

from typing import Any


def handle(request: Any) -> Any:
    raise NotImplementedError
