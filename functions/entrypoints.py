"""The targets: `release`, `wake`, `sweep` (CloudEvent) and `ingest` (HTTP), kept thin since
functions-framework imports this on cold start. The adapters drop irrelevant or malformed
events with a reason (acknowledged) before any client is built.
"""

from __future__ import annotations

from typing import Any

import flask
import functions_framework
from werkzeug.exceptions import Forbidden

from functions import doors, process
from functions import ingest as _ingest
from shared import log
from shared.adapters import ACCEPT_RELEASE, ACCEPT_SWEEP, ACCEPT_WAKE, parse_cloudevent
from shared.adapters.budget import MAX_SETS_PER_REQUEST, within_budget
from shared.adapters.result import DropReason
from shared.constants import METRIC_DROPPED
from shared.errors import PermanentError

# Size and nesting before the framework parses a CloudEvent body (its parser answers 500).
doors.cap_current_app()


def _caller() -> doors.Caller:
    """Who sent this request: what `serve` authenticated, else the platform in front of us
    (a Cloud Run function is reached only through its trigger's invoker identity)."""
    if flask.has_request_context():
        caller = flask.request.environ.get(doors.ENVIRON_KEY)
        if isinstance(caller, doors.Caller):
            return caller
    return doors.PLATFORM_CALLER


def _run(event: Any, *, target: str, accept: frozenset[str]) -> None:
    settings = process.settings()  # a ConfigError here is a 500: fix the deployment
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
    caller = _caller()
    refused = doors.authorize(caller, parsed.triggers)
    if refused is not None:
        # Before any client: a credential asking beyond its grant changes nothing.
        log.warning("event refused", target=target, outcome="forbidden", reason=refused)
        raise Forbidden(refused)
    kept, deferred = within_budget(doors.attribute(caller, parsed.triggers))
    if deferred:
        log.count(METRIC_DROPPED, target=target, reason=DropReason.OVER_BUDGET.value)
        log.warning(
            "event work over the per-request budget deferred; the sweep converges it",
            target=target,
            outcome="deferred",
            deferred=len(deferred),
            limit=MAX_SETS_PER_REQUEST,
        )
    if not kept:
        return
    # The reconciler and the clients load only once an event matters (cold start).
    from functions import dispatch  # noqa: PLC0415 - lazy: cold start

    dispatch.run(kept, settings=settings, target=target)


@functions_framework.cloud_event
def release(event: Any) -> None:
    _run(event, target="release", accept=ACCEPT_RELEASE)


@functions_framework.cloud_event
def wake(event: Any) -> None:
    _run(event, target="wake", accept=ACCEPT_WAKE)


@functions_framework.cloud_event
def sweep(event: Any) -> None:
    _run(event, target="sweep", accept=ACCEPT_SWEEP)


@functions_framework.http
def ingest(request: Any) -> Any:
    return _ingest.handle(request)
