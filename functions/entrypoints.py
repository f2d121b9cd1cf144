"""The targets (docs/design.md#targets): `release`, `wake`, `sweep` (CloudEvent), `ingest` (HTTP).

Kept thin on purpose: functions-framework imports this file on cold start
(through the top-level `main.py` on Cloud Run, or by its installed path under
`cocoon-hibernation serve` and the local stack), so it imports nothing heavy.
Each target hands the request to its module in `functions/`, which parses the
trigger and only then loads the clients it needs.
"""

from __future__ import annotations

from typing import Any

import functions_framework

from functions import ingest as _ingest
from functions import targets as _targets


@functions_framework.cloud_event
def release(event: Any) -> None:
    _targets.release(event)


@functions_framework.cloud_event
def wake(event: Any) -> None:
    _targets.wake(event)


@functions_framework.cloud_event
def sweep(event: Any) -> None:
    _targets.sweep(event)


@functions_framework.http
def ingest(request: Any) -> Any:
    return _ingest.handle(request)
