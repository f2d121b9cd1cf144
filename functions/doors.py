"""Who may come in at which door, and what they may ask for (docs/security.md).

`authenticate` sees headers only, before the body; `authorize` the parsed triggers, before any
client. Per-target Cloud Run functions are `PLATFORM` unless COCOON_TARGET_AUTH=doors.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from http import HTTPStatus
from typing import Any

import flask

from functions import process
from shared import log
from shared.config import Settings
from shared.errors import ConfigError, TransientError
from shared.triggers import SetChanged, SnapshotPushed, SweepTick, Trigger, WakeRequested


class Door(StrEnum):
    # Each also opens to an in-cluster caller COCOON_CLUSTER_CALLERS maps to it.
    REGISTRY = "registry"  # COCOON_INGEST_TOKEN
    AUDIT = "audit"  # COCOON_AUDIT_TOKEN
    WAKE = "wake"  # COCOON_WAKE_TOKEN, COCOON_WAKE_TOKENS
    SWEEP = "sweep"  # COCOON_SWEEP_TOKEN
    PUSH = "pubsub-push"  # a Google OIDC token of COCOON_PUSH_SERVICE_ACCOUNTS
    PLATFORM = "platform"  # authenticated in front of us (per-target functions)


VARIABLES = {
    Door.REGISTRY: "COCOON_INGEST_TOKEN",
    Door.AUDIT: "COCOON_AUDIT_TOKEN",
    Door.WAKE: "COCOON_WAKE_TOKEN or COCOON_WAKE_TOKENS",
    Door.SWEEP: "COCOON_SWEEP_TOKEN",
}

# What each credential may bring. PUSH is a Pub/Sub push subscription of
# people's wake requests and the scheduler's ticks (what `/pubsub` accepts).
GRANTS: Mapping[Door, tuple[type[Trigger], ...]] = {
    Door.REGISTRY: (SnapshotPushed,),
    Door.AUDIT: (SetChanged,),
    Door.WAKE: (WakeRequested,),
    Door.SWEEP: (SweepTick,),
    Door.PUSH: (WakeRequested, SweepTick),
    Door.PLATFORM: (SnapshotPushed, SetChanged, WakeRequested, SweepTick),
}

# A Knative source sets no header of its own but sends its `ceOverrides` extensions as
# `ce-<name>` headers: its door's secret rides as `cocoonauth` (infra/k8s/knative/sources.yaml).
EXTENSION_HEADER = "Ce-Cocoonauth"
ENVIRON_KEY = "cocoon.caller"  # where serve hands the caller to the target it routes to


@dataclass(frozen=True, slots=True)
class Caller:
    door: Door
    name: str  # the credential's name for logs (a variable, an email), never the secret
    namespaces: frozenset[str] | None = None  # a wake credential's scope; None = any


PLATFORM_CALLER = Caller(Door.PLATFORM, "platform")


def attribute(caller: Caller, triggers: Sequence[Trigger]) -> list[Trigger]:
    """Wake requests signed with the credential's name (never the secret): Events say who asked."""
    who = f"{caller.door.value}:{caller.name}"
    return [replace(t, requester=who) if isinstance(t, WakeRequested) else t for t in triggers]


def presented_secret(headers: Mapping[str, str]) -> tuple[str, bool]:
    """(secret, well_formed): the bearer token, else the `cocoonauth` extension header."""
    scheme, _, value = (headers.get("Authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), True
    if extension := (headers.get(EXTENSION_HEADER) or "").strip():
        return extension, True
    # A secret sent without the `Bearer ` prefix is in "scheme": presented, never logged.
    return "", bool(scheme)


_TOKENS = {Door.REGISTRY: "ingest_token", Door.AUDIT: "audit_token", Door.SWEEP: "sweep_token"}


def _candidates(doors: Iterable[Door], config: Settings) -> list[tuple[str, Caller]]:
    out: list[tuple[str, Caller]] = []
    for door in doors:
        if door is Door.WAKE:
            out.extend(
                (w.token, Caller(door, w.name, w.namespaces)) for w in config.wake_credentials
            )
        elif door in _TOKENS and (token := getattr(config, _TOKENS[door])):
            out.append((token, Caller(door, VARIABLES[door])))
    return out


def configured(doors: Iterable[Door], config: Settings) -> bool:
    """Whether any of `doors` has a credential (a route with none is closed, never open)."""
    doors = tuple(doors)
    return (
        bool(_candidates(doors, config))
        or (Door.PUSH in doors and bool(config.push_audience))
        or any(Door(door) in doors for _, door in config.cluster_callers)
    )


def authenticate(secret: str, doors: Sequence[Door], config: Settings) -> Caller | None:
    """The caller whose configured secret equals `secret`, among `doors`; else the listed
    in-cluster caller a TokenReview says it is; else None (TransientError: cannot tell now)."""
    found: Caller | None = None
    presented = secret.encode()
    for token, caller in _candidates(doors, config):
        # No break: the time taken does not depend on which candidate matched.
        if hmac.compare_digest(presented, token.encode()) and found is None:
            found = caller
    return found or _reviewed(secret, doors, config)


# Positive TokenReview answers by the token's hash, so a burst of events is not a burst of
# reviews; kept briefly (never past the token's `exp`) so a deleted ServiceAccount stops
# working soon. Refusals are never kept.
REVIEW_TTL = 30.0
_reviews: dict[bytes, tuple[float, str]] = {}
_reviews_lock = threading.Lock()


def _claims(token: str) -> dict[str, Any]:
    """A JWT's payload, unverified (who it claims to be); {} for anything else."""
    parts = token.split(".")
    if len(parts) != 3 or len(token) > 16 * 1024:
        return {}
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, RecursionError):
        return {}
    return claims if isinstance(claims, dict) else {}


def _reviewed(token: str, doors: Sequence[Door], config: Settings) -> Caller | None:
    listed = {user: Door(door) for user, door in config.cluster_callers if Door(door) in doors}
    claims = _claims(token)
    # A token claiming no listed name costs no API request.
    claimed = claims.get("sub")
    if not config.cluster_audience or not isinstance(claimed, str) or claimed not in listed:
        return None
    key, now = hashlib.sha256(token.encode()).digest(), time.monotonic()
    with _reviews_lock:
        until, user = _reviews.get(key, (0.0, ""))
    if until <= now:
        found = process.kube_client(config).review_token(token, config.cluster_audience)
        if found is None:
            return None
        user = found
        exp = claims.get("exp")
        left = exp - time.time() if isinstance(exp, int | float) else REVIEW_TTL
        with _reviews_lock:
            if len(_reviews) >= 1024:
                _reviews.clear()
            _reviews[key] = (now + min(REVIEW_TTL, left), user)
    door = listed.get(user)
    return Caller(door, user) if door is not None else None


def authorize(caller: Caller, triggers: Iterable[Trigger]) -> str | None:
    """None if `caller` may bring every trigger; else the first refusal's reason (a 403's)."""
    for trigger in triggers:
        if not isinstance(trigger, GRANTS[caller.door]):
            return f"{caller.name} may not bring {type(trigger).__name__}"
        if (
            isinstance(trigger, WakeRequested)
            and caller.namespaces is not None
            and trigger.ref.namespace not in caller.namespaces
        ):
            return f"{caller.name} may not wake in namespace {trigger.ref.namespace}"
    return None


# A CloudEvent is a few hundred bytes; an audit batch of 400 Metadata-level events fits.
MAX_BODY = 1 << 20
# The credentials each CloudEvent target accepts: registries and the cluster's sources
# release; wake requests and the sources' set changes wake; only the sweep door ticks.
CLOUDEVENT_DOORS: dict[str, tuple[Door, ...]] = {
    "release": (Door.REGISTRY, Door.AUDIT),
    "wake": (Door.WAKE, Door.AUDIT),
    "sweep": (Door.SWEEP,),
}
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _too_deep(body: bytes, content_type: str) -> bool:
    """JSON the parser cannot survive (RecursionError), which the framework would answer 500."""
    if "json" not in content_type.lower():
        return False
    try:
        json.loads(body)
    except RecursionError:
        return True
    except ValueError:
        return False  # not JSON at all: the framework's own 400
    return False


Refusal = tuple[int, dict[str, object], dict[str, str]]
NOT_POST: Refusal = (405, {"error": "method not allowed"}, {"Allow": "POST"})
MISCONFIGURED: Refusal = (500, {"error": "misconfigured"}, {})
UNAUTHENTICATED: Refusal = (401, {"error": "unauthenticated"}, {"WWW-Authenticate": "Bearer"})
TOO_LARGE: Refusal = (413, {"error": "body too large", "limit": MAX_BODY}, {})


def admit(
    headers: Mapping[str, str],
    route: str,
    accepted: Sequence[Door],
    config: Settings,
    *,
    who: str = "",
    fallback: Callable[[str], Caller | Refusal] | None = None,
) -> Caller | Refusal:
    """The caller at `route`'s door, or the refusal to send; reads headers only. `fallback`
    judges a secret no door's credential matched (ingest's Pub/Sub push tokens)."""
    if not configured(accepted, config):
        # A door without a credential stays shut: never open by omission.
        needed = " or ".join(VARIABLES[d] for d in accepted if d in VARIABLES)
        log.error(f"{who}refusing {route}: {needed} is not set", route=route, variable=needed)
        return MISCONFIGURED
    secret, presented = presented_secret(headers)
    caller = None
    if secret:
        try:
            caller = authenticate(secret, accepted, config)
        except TransientError as err:
            log.warning(f"{who}credential not verifiable now", route=route, error=str(err))
            return 503, {"error": "retry"}, {}
        except ConfigError as err:  # no Kubernetes credentials to ask a TokenReview with
            log.error(f"{who}credential not verifiable", route=route, error=str(err))
            return MISCONFIGURED
        if caller is None and fallback is not None:
            return fallback(secret)
    if caller is None:
        # Never the header itself: Harbor sends `auth_header` verbatim (presented_secret).
        log.warning(f"{who}request unauthenticated", route=route, presented=presented)
        return UNAUTHENTICATED
    return caller


def read_body(length: str, stream: Any, route: str, who: str = "") -> bytes | None:
    """The body, or None (logged) past MAX_BODY: a 413. Read up to the cap in chunks,
    since a chunked body has no Content-Length."""
    if length and (not length.isdigit() or int(length) > MAX_BODY):
        log.warning(f"{who}body too large", route=route, content_length=length[:20])
        return None
    buf = bytearray()
    while chunk := stream.read(min(64 * 1024, MAX_BODY + 1 - len(buf))):
        buf += chunk
        if len(buf) > MAX_BODY:
            log.warning(f"{who}body too large while reading", route=route)
            return None
    return bytes(buf)


def _send(refusal: Refusal, start_response: Callable[..., Any]) -> list[bytes]:
    """A refusal sent without reading the body; the connection is not reused with it unread."""
    status, body, headers = refusal
    data = json.dumps(body).encode()
    phrase = "Content Too Large" if status == 413 else HTTPStatus(status).phrase  # RFC 9110's
    start_response(
        f"{status} {phrase}",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            ("Connection", "close"),
            *headers.items(),
        ],
    )
    return [data]


def capped(app: WSGIApp, route: str) -> WSGIApp:
    """`app` behind a size and nesting check, before functions-framework parses the body."""

    def guard(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        body = read_body(environ.get("CONTENT_LENGTH") or "", environ["wsgi.input"], route)
        if body is None:
            return _send(TOO_LARGE, start_response)
        if _too_deep(body, environ.get("CONTENT_TYPE", "")):
            log.warning("body nested too deeply", route=route)
            return _send((400, {"error": "JSON nested too deeply"}, {}), start_response)
        # The framework reads the buffered copy; a chunked framing is spent.
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        environ["wsgi.input_terminated"] = True
        return app(environ, start_response)

    return guard


def guarded(app: WSGIApp, route: str, *, platform: bool = False) -> WSGIApp:
    """`app` behind its door: method and credential before the body is read. `platform`: a
    per-target process, left to the platform in front unless COCOON_TARGET_AUTH=doors."""
    accepted = CLOUDEVENT_DOORS[route.lstrip("/")]

    def guard(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if isinstance(environ.get(ENVIRON_KEY), Caller):
            return app(environ, start_response)  # `serve` let it in already
        try:
            config = process.settings()
        except ConfigError as err:
            log.error("refusing requests: invalid configuration", route=route, error=str(err))
            return _send(MISCONFIGURED, start_response)
        if platform and not config.target_auth:
            return app(environ, start_response)
        if environ.get("REQUEST_METHOD") != "POST":
            return _send(NOT_POST, start_response)
        headers = {
            "Authorization": environ.get("HTTP_AUTHORIZATION", ""),
            EXTENSION_HEADER: environ.get("HTTP_CE_COCOONAUTH", ""),
        }
        caller = admit(headers, route, accepted, config)
        if not isinstance(caller, Caller):
            return _send(caller, start_response)
        environ[ENVIRON_KEY] = caller
        return app(environ, start_response)

    return guard


def cap_current_app() -> None:
    """Put `guarded` and `capped` in front of the CloudEvent target functions-framework is
    loading us for (it imports the source inside the app, named after the target)."""
    if not flask.has_app_context():
        return
    app = flask.current_app
    if app.name in CLOUDEVENT_DOORS and not app.config.get("COCOON_CAPPED"):
        app.config["COCOON_CAPPED"] = True
        route = "/" + app.name
        app.wsgi_app = guarded(capped(app.wsgi_app, route), route, platform=True)  # type: ignore[method-assign,assignment]
