"""A functions-framework source for tests: a `@cloud_event` target that runs the adapter.

The release/wake/sweep targets belong to the reconciler work; this probe lets
the adapter be driven exactly as they will drive it (the framework decodes
the HTTP request into a `cloudevents.http.CloudEvent`), and records the result.
"""

from __future__ import annotations

from typing import Any

import functions_framework

from shared.adapters import Parsed, parse_cloudevent
from shared.config import Settings


class Probe:
    settings: Settings = Settings()
    accept: frozenset[str] | None = None
    results: list[Parsed | Exception] = []  # noqa: RUF012 - test recorder, reset per test


@functions_framework.cloud_event
def probe(event: Any) -> None:
    try:
        Probe.results.append(parse_cloudevent(event, settings=Probe.settings, accept=Probe.accept))
    except Exception as err:  # recorded for the test to assert on
        Probe.results.append(err)
