"""Lifecycle CloudEvents to Pub/Sub: what a set went through, beside its Kubernetes Events.
Pure builders, and two ways to send: `publish` for owed reports (`released`, `woken`: a failure
raises, the marker stays, the redelivery sends the same `id`), `emit` for the rest (best-effort)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Any, Final, Protocol

from shared import constants as k
from shared import log
from shared.errors import CocoonError, TransientError

if TYPE_CHECKING:
    from shared.config import Settings
    from shared.models import CocoonSet

SOURCE_PREFIX: Final = "//cocoon-hibernation"
# The context attributes copied to message attributes, for subscription filters.
_MIRRORED = ("specversion", "type", "source", "subject", "id", "time")


class LifecycleKind(StrEnum):
    RELEASED = "released"
    WAKING = "waking"
    WOKEN = "woken"
    WAKE_NO_CAPACITY = "wake-no-capacity"
    IDLE_SUSPENDED = "idle-suspended"
    SEAT_RECLAIMED = "seat-reclaimed"

    @property
    def ce_type(self) -> str:
        return f"{k.CE_LIFECYCLE_PREFIX}{self.value}"


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """One Pub/Sub message, as the publisher sends it."""

    data: bytes
    ordering_key: str
    attributes: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class LifecycleEvent:
    kind: LifecycleKind
    namespace: str
    name: str
    uid: str | None
    id: str
    time: datetime
    details: Mapping[str, Any] = field(default_factory=dict)  # JSON values only

    @property
    def type(self) -> str:
        return self.kind.ce_type

    @property
    def source(self) -> str:
        return f"{SOURCE_PREFIX}/namespaces/{self.namespace}/{k.PLURAL}/{self.name}"

    @property
    def subject(self) -> str:
        return f"{self.namespace}/{self.name}"

    ordering_key = subject  # one set's events stay in order; sets are independent

    def log_fields(self) -> dict[str, str]:
        return {"cocoonset": self.subject, "event_type": self.type, "event_id": self.id}

    def cloudevent(self) -> dict[str, Any]:
        """The structured-mode CloudEvent (JSON event format, specversion 1.0)."""
        return {
            "specversion": "1.0",
            "type": self.type,
            "source": self.source,
            "subject": self.subject,
            "id": self.id,
            "time": rfc3339_millis(self.time),
            "datacontenttype": "application/json",
            "data": {
                "namespace": self.namespace,
                "name": self.name,
                "uid": self.uid,
                **self.details,
            },
        }

    def message(self) -> OutboundMessage:
        # Structured content mode: the data is the whole event, so it survives any hop
        # keeping only data.
        event = self.cloudevent()
        attributes = {
            "Content-Type": "application/cloudevents+json; charset=utf-8",
            **{f"ce-{key}": str(event[key]) for key in _MIRRORED},
        }
        data = json.dumps(event, separators=(",", ":"), sort_keys=True).encode()
        return OutboundMessage(data=data, ordering_key=self.ordering_key, attributes=attributes)


def rfc3339_millis(value: datetime) -> str:
    t = value.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _random_id() -> str:
    return uuid.uuid4().hex


def _event(
    kind: LifecycleKind,
    cs: CocoonSet,
    now: datetime,
    details: Mapping[str, Any],
    *parts: str | None,
) -> LifecycleEvent:
    """`id` is `<kind>:<set uid>:<parts>` (by default the causing write's resourceVersion),
    naming the occurrence so a consumer can dedupe; random only when the set has no uid or a
    part is missing (never on a real API object)."""
    parts = parts or (cs.metadata.resource_version,)
    uid = cs.metadata.uid
    ok = uid and all(parts)
    id = ":".join((kind.value, uid or "", *(p or "" for p in parts))) if ok else _random_id()
    return LifecycleEvent(kind, cs.namespace, cs.name, uid, id, now, dict(details))


# The builders: `cs` is the set as the write that caused the event returned it.


def released(
    cs: CocoonSet,
    *,
    deleted_pods: Sequence[str],
    hint: str,
    now: datetime,
    occurrence: str | None = None,
) -> LifecycleEvent:
    """`occurrence`: the release round's durable identity (else the write's resourceVersion)."""
    details = {"deletedPods": sorted(deleted_pods), "hintNode": hint or None}
    rnd = occurrence or cs.metadata.resource_version
    return _event(LifecycleKind.RELEASED, cs, now, details, rnd)


def waking(cs: CocoonSet, *, hint: str, now: datetime) -> LifecycleEvent:
    return _event(LifecycleKind.WAKING, cs, now, {"hintNode": hint or None})


def woken(
    cs: CocoonSet,
    *,
    placement: str,
    node: str | None,
    hint: str,
    now: datetime,
    occurrence: str | None = None,
) -> LifecycleEvent:
    """`occurrence`: the wake's durable identity, the restored pod's uid."""
    details = {"placement": placement, "node": node or None, "hintNode": hint or None}
    wake = occurrence or cs.metadata.resource_version
    return _event(LifecycleKind.WOKEN, cs, now, details, wake)


def wake_no_capacity(
    cs: CocoonSet, *, pod: str, pod_uid: str, message: str, now: datetime
) -> LifecycleEvent:
    # The situation, not a write: the same (pod, message) its Kubernetes Event is named after.
    digest = hashlib.sha256(message.encode()).hexdigest()[:16]
    details = {"pod": pod, "podUid": pod_uid or None, "message": message}
    return _event(LifecycleKind.WAKE_NO_CAPACITY, cs, now, details, pod_uid, digest)


def idle_suspended(
    cs: CocoonSet,
    *,
    idle_for: timedelta,
    timeout: timedelta,
    last_activity: datetime,
    now: datetime,
) -> LifecycleEvent:
    details = {
        "idleSeconds": int(idle_for.total_seconds()),
        "idleTimeoutSeconds": int(timeout.total_seconds()),
        "lastActivity": rfc3339_millis(last_activity),
    }
    return _event(LifecycleKind.IDLE_SUSPENDED, cs, now, details)


def seat_reclaimed(
    victim: CocoonSet, *, waker: str, pod_uid: str, idle_for: timedelta, pool: str, now: datetime
) -> LifecycleEvent:
    """About the victim (its seat is what moves); `waker` is `<ns>/<name>` of the wake."""
    details = {
        "reclaimedFor": waker,
        "wakePodUid": pod_uid or None,
        "idleSeconds": int(idle_for.total_seconds()),
        "pool": pool,
    }
    return _event(LifecycleKind.SEAT_RECLAIMED, victim, now, details)


class LifecyclePublisher(Protocol):
    """What the executor and the sweep need of :class:`shared.clients.pubsub.PubSubPublisher`."""

    def publish(self, data: bytes, *, ordering_key: str, attributes: Mapping[str, str]) -> str:
        """Publish one message and wait for the server's id; raises only CocoonError types."""


def _send(publisher: LifecyclePublisher, event: LifecycleEvent) -> None:
    msg = event.message()
    message_id = publisher.publish(
        msg.data, ordering_key=msg.ordering_key, attributes=msg.attributes
    )
    log.debug("lifecycle event published", **event.log_fields(), message_id=message_id)


def emit(publisher: LifecyclePublisher | None, event: LifecycleEvent) -> bool:
    """Best-effort: True when the topic acknowledged it. The Kubernetes Events and counters
    are the record; retrying a reconcile whose writes landed would not bring it back."""
    if publisher is None:
        return False
    try:
        _send(publisher, event)
    except CocoonError as err:
        log.warning(
            "lifecycle event not published",
            **event.log_fields(),
            error=str(err),
            error_type=type(err).__name__,
        )
        return False
    return True


def publish(publisher: LifecyclePublisher | None, event: LifecycleEvent) -> None:
    """An owed event: a failure raises TransientError, so the report stays owed and the
    redelivery publishes the same `id` again. No publisher configured = nothing owed."""
    if publisher is None:
        return
    try:
        _send(publisher, event)
    except CocoonError as err:
        raise TransientError(
            f"lifecycle event {event.type} {event.id} for {event.subject} not published: {err}"
        ) from err


class _FromSettings(Enum):
    FROM_SETTINGS = "from-settings"


# The default of every `publisher=`: the process's publisher for the topic, or None (unset).
FROM_SETTINGS: Final = _FromSettings.FROM_SETTINGS
PublisherArg = LifecyclePublisher | None | _FromSettings


def resolve_publisher(arg: PublisherArg, settings: Settings | None) -> LifecyclePublisher | None:
    """An explicit publisher (or None) as given; else the process's one for `settings`
    (cheap: the Pub/Sub library loads on the first publish)."""
    if not isinstance(arg, _FromSettings):
        return arg
    if settings is None or settings.events_topic is None:
        return None
    from shared.clients import pubsub  # noqa: PLC0415 - only when a topic is configured

    return pubsub.get_publisher(settings.events_topic)
