"""The HTTP `ingest` target: `/registry`, `/kubernetes/audit`, `/pubsub`.

Each route is a door with its own credential (functions.doors), checked before the body.
Distribution retries a non-2xx forever: only transient failures and misconfiguration get 503.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from functions import doors, process
from functions.doors import Caller, Door
from shared import log
from shared.adapters import (
    ACCEPT_PUBSUB_PUSH,
    Parsed,
    parse_audit_eventlist,
    parse_pubsub_push,
    parse_registry_webhook,
)
from shared.adapters.budget import MAX_SETS_PER_REQUEST, within_budget
from shared.adapters.result import DropReason
from shared.config import Settings
from shared.constants import METRIC_DROPPED
from shared.errors import ConfigError, InvalidName, PermanentError, TransientError
from shared.log import clip
from shared.triggers import Trigger, describe

MAX_BODY = doors.MAX_BODY
# Items of one batch (registry events, audit events): kube-apiserver sends at most
# 400 per batch by default (--audit-webhook-batch-max-size), Distribution one.
MAX_BATCH_EVENTS = 1000
TARGET = "ingest"

ROUTE_REGISTRY = "/registry"
ROUTE_AUDIT = "/kubernetes/audit"
ROUTE_PUBSUB = "/pubsub"

Reply = tuple[str | Iterator[str], int, dict[str, str]]


class Dispatch(Protocol):
    def __call__(self, triggers: Sequence[Trigger], *, settings: Settings, target: str) -> None: ...


# Injection points, read per request: None = `functions.dispatch.run` (imported lazily) and
# `shared.clients.oidc`'s verification of a Google OIDC token for an audience.
dispatch: Dispatch | None = None
verify_push_token: Callable[[str, str], Mapping[str, Any]] | None = None


def _reply(status: int, body: Mapping[str, object]) -> Reply:
    return json.dumps(body), status, {"Content-Type": "application/json"}


def _refuse(refusal: doors.Refusal) -> Reply:
    """A refusal sent without reading the body: streamed, because functions-framework drains
    the body after any other response, and with the connection closed."""
    status, body, headers = refusal
    return (
        iter([json.dumps(body)]),
        status,
        {"Content-Type": "application/json", "Connection": "close", **headers},
    )


# Each route's credentials (functions.doors) and parser (body, Content-Type, settings).
_ROUTES: dict[str, tuple[tuple[Door, ...], Callable[[bytes, str | None, Settings], Parsed]]] = {
    ROUTE_REGISTRY: ((Door.REGISTRY,), parse_registry_webhook),
    ROUTE_AUDIT: ((Door.AUDIT,), lambda body, _, config: parse_audit_eventlist(body, config)),
    ROUTE_PUBSUB: (
        (Door.WAKE, Door.SWEEP, Door.PUSH),
        lambda body, _, config: parse_pubsub_push(body, config, accept=ACCEPT_PUBSUB_PUSH),
    ),
}


def handle(request: Any) -> Reply:
    """One webhook delivery (a `flask.Request`) -> (body, status, headers)."""
    route = request.path.rstrip("/")
    if route not in _ROUTES:
        return _refuse((404, {"error": "not found"}, {}))
    accepted, parse = _ROUTES[route]
    if request.method != "POST":
        return _refuse(doors.NOT_POST)
    try:
        config = process.settings()
    except ConfigError as err:
        log.error("ingest refuses requests: invalid configuration", error=str(err))
        return _refuse(doors.MISCONFIGURED)
    push = Door.PUSH in accepted and config.push_audience
    oidc = partial(_verify_oidc, config=config) if push else None
    caller = doors.admit(request.headers, route, accepted, config, who="ingest ", fallback=oidc)
    if not isinstance(caller, Caller):
        return _refuse(caller)
    length = str(request.content_length or "")
    body = doors.read_body(length, request.stream, route, who="ingest ")
    if body is None:
        return _refuse(doors.TOO_LARGE)

    try:
        parsed = parse(body, request.content_type, config)
    except PermanentError as err:
        reason = DropReason.INVALID_NAME if isinstance(err, InvalidName) else DropReason.MALFORMED
        log.count(METRIC_DROPPED, target="ingest", reason=reason.value)
        log.warning(
            "ingest event dropped",
            route=route,
            decision="dropped",
            reason=reason.value,
            detail=clip(str(err)),
            event_id=None,
        )
        return _reply(202, {"accepted": 0, "dropped": 1})
    refused = doors.authorize(caller, parsed.triggers)
    if refused is not None:
        log.warning(
            "ingest request not authorized", route=route, caller=caller.name, reason=refused
        )
        return _reply(403, {"error": "forbidden", "reason": refused})
    items = len(parsed.triggers) + len(parsed.dropped)
    if items > MAX_BATCH_EVENTS:
        log.warning("ingest batch too large", route=route, events=items, limit=MAX_BATCH_EVENTS)
        return _reply(413, {"error": "too many events", "limit": MAX_BATCH_EVENTS})
    return _act(route, replace(parsed, triggers=doors.attribute(caller, parsed.triggers)), config)


def _verify_oidc(token: str, config: Settings) -> Caller | doors.Refusal:
    from shared.clients import oidc  # noqa: PLC0415 - lazy: cold start

    assert config.push_audience  # the caller checked
    verify = verify_push_token or (lambda t, a: oidc.verify_push_token(t, audience=a))
    try:
        claims = verify(token, config.push_audience)
        # Kept outside the injectable verifier: only the allowlist authorises a Google token.
        caller = oidc.require_caller(claims, config.push_service_accounts)
    except oidc.TokenRejected as err:
        log.warning("ingest push token rejected", route=ROUTE_PUBSUB, error=str(err))
        return doors.UNAUTHENTICATED
    except TransientError as err:
        log.warning("ingest push token not verifiable now", error=str(err))
        return 503, {"error": "retry"}, {}
    log.debug("ingest push token accepted", caller=clip(caller))
    return Caller(Door.PUSH, clip(caller))


def _act(route: str, parsed: Parsed, config: Settings) -> Reply:
    for drop in parsed.dropped:
        log.count(METRIC_DROPPED, target="ingest", reason=drop.reason.value)
        log.info(
            "ingest event dropped",
            route=route,
            kind=parsed.kind,
            decision="dropped",
            reason=drop.reason.value,
            detail=drop.detail,
            event_id=drop.event_id,
        )
    kept, deferred = within_budget(parsed.triggers)
    counts: dict[str, object] = {"accepted": len(kept), "dropped": len(parsed.dropped)}
    if deferred:
        # Not dropped in silence: the answer and a Warning say how many; the sweep converges.
        log.count(METRIC_DROPPED, target="ingest", reason=DropReason.OVER_BUDGET.value)
        log.warning(
            "ingest deferred work over the per-request budget; the sweep converges it",
            route=route,
            kind=parsed.kind,
            decision="deferred",
            reason=DropReason.OVER_BUDGET.value,
            deferred=len(deferred),
            limit=MAX_SETS_PER_REQUEST,
            event_id=parsed.event_id,
        )
        counts |= {"deferred": len(deferred), "limit_sets": MAX_SETS_PER_REQUEST}
    for trigger in kept:
        log.info(
            "ingest event accepted",
            route=route,
            kind=parsed.kind,
            decision="accepted",
            reason=type(trigger).__name__,
            source=trigger.source.value,
            event_id=trigger.event_id,
            **describe(trigger),
        )
    if any(d.reason is DropReason.NO_REGISTRY_BASE for d in parsed.dropped):
        # A `:hibernate` push we cannot place: its redelivery succeeds once this is set.
        log.error("ingest cannot place a snapshot: COCOON_REGISTRY_BASE is not set")
        return _reply(503, {**counts, "error": "misconfigured"})
    if not kept:
        return _reply(202, counts)

    act = dispatch
    if act is None:
        from functions import dispatch as dispatcher  # noqa: PLC0415 - lazy: cold start

        act = dispatcher.run
    try:
        act(kept, settings=config, target=TARGET)
    except (TransientError, ConfigError) as err:
        log.warning(
            "ingest dispatch failed, asking for redelivery",
            route=route,
            decision="retry",
            reason=type(err).__name__,
            detail=clip(str(err)),
            event_id=parsed.event_id,
        )
        return _reply(503, {**counts, "error": "retry"})
    except PermanentError as err:
        log.warning(
            "ingest dispatch gave up on the event",
            route=route,
            decision="dropped",
            reason=type(err).__name__,
            detail=clip(str(err)),
            event_id=parsed.event_id,
        )
    return _reply(202, counts)
