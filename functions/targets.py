"""The CloudEvent targets: CloudEvent -> triggers -> runtime.

Each target is defined by the event types it accepts (docs/design.md#targets); the adapters
drop everything else with a reason *before* any client is built, so an
irrelevant or malformed event costs no API or registry call and is
acknowledged (a 2xx: redelivering it cannot help).
"""

from __future__ import annotations

from typing import Any

from functions import settings as process_settings
from shared import log
from shared.adapters import ACCEPT_RELEASE, ACCEPT_SWEEP, ACCEPT_WAKE, parse_cloudevent
from shared.errors import PermanentError
from shared.metric_names import METRIC_DROPPED


def _run(event: Any, *, target: str, accept: frozenset[str]) -> None:
    settings = process_settings.get()  # a ConfigError here is a 500: fix the deployment
    try:
        parsed = parse_cloudevent(event, settings=settings, accept=accept)
    except PermanentError as e:
        log.info("event acknowledged", target=target, outcome="malformed", reason=str(e))
        log.count(METRIC_DROPPED, target=target, reason="malformed")
        return
    for drop in parsed.dropped:
        log.count(METRIC_DROPPED, target=target, reason=drop.reason.value)
        log.info(
            "event dropped",
            target=target,
            outcome="dropped",
            reason=drop.reason.value,
            detail=drop.detail,
            event_id=drop.event_id,
        )
    if not parsed.triggers:
        return
    # The runtime pulls in the reconciler and the client wrappers: loaded only
    # once an event matters, so an irrelevant one is answered at import cost zero.
    from functions import runtime  # noqa: PLC0415 - lazy: cold start

    runtime.run(parsed.triggers, settings=settings, target=target)


def release(event: Any) -> None:
    _run(event, target="release", accept=ACCEPT_RELEASE)


def wake(event: Any) -> None:
    _run(event, target="wake", accept=ACCEPT_WAKE)


def sweep(event: Any) -> None:
    _run(event, target="sweep", accept=ACCEPT_SWEEP)
