"""Lifecycle CloudEvents (docs/design.md#lifecycle): what a set went through, told to Pub/Sub.

Five kinds, each emitted at exactly the point where its Kubernetes Event is:

| kind               | when                                                   | Kubernetes Event |
|--------------------|--------------------------------------------------------|------------------|
| `released`         | an owed release report (the round's pods are gone)     | `SeatReleased`   |
| `waking`           | the compare-and-swap winner persisted phase `Waking`   | (none)           |
| `woken`            | an owed wake report (the hint-clearing CAS landed)     | `WakeCompleted`  |
| `wake-no-capacity` | `WakeNoCapacity` was newly emitted (not on a repeat)   | `WakeNoCapacity` |
| `idle-suspended`   | the sweep's CAS patch `spec.suspend=true` landed       | `IdleSuspended`  |
| `seat-reclaimed`   | a waiting wake's CAS suspend of an idle victim landed  | `SeatReclaimed`  |

The builders here are pure (a set and a few facts in, an event value out);
the wire form is the CloudEvents *structured* content mode of the Pub/Sub
protocol binding: the message data is the whole event as JSON
(`Content-Type: application/cloudevents+json`), so the event survives any hop
that keeps only the data (a BigQuery or Cloud Storage subscription, a log
sink, Eventarc's `messagePublished` wrapping, a re-publish). The binding lets
a structured message carry the `ce-*` attributes too (§3.2.3, "MAY"), and we
do: subscriptions can then filter on `attributes.ce-type` without decoding.

Invariants:

- `id` is deterministic per occurrence where the occurrence has an identity:
  `released:<set uid>:g<release round>` and `woken:<set uid>:<restored pod uid>`
  (the durable identities of `shared.reconcile.owed`, which also name their
  Kubernetes Events); `waking`/`idle-suspended`:
  `<kind>:<set uid>:<resourceVersion of the write that caused it>`; the
  no-capacity warning: `<kind>:<set uid>:<pod uid>:<message hash>`. A consumer
  dedupes a redelivery on (`source`, `id`). Only when the set has no uid or
  version (never on a real API object) is a random id used.
- `ordering_key` is `<namespace>/<name>`: one set's events stay in order, sets
  are independent. Across function instances the order holds because each
  publish waits for its acknowledgement and the next kind needs a later state
  (`woken` cannot be decided before `waking` was persisted and published).
- At least once, per occurrence: a `Waking` that a stale status write
  overwrote and the reconcile persists again is a new write, so a new `waking`
  (with its own id) goes out; consumers treat `waking` as "a restore is in
  flight", not as "a new wake started".
- `released` and `woken` are at least once (:func:`publish` raises, the owed
  marker stays, the platform redelivers and the same `id` goes out again).
  The others are best-effort (:func:`emit`): a lost one is logged, never a
  failed or retried invocation.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
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

SPECVERSION: Final = "1.0"
DATA_CONTENT_TYPE: Final = "application/json"
# The binding's structured-mode marker (Pub/Sub protocol binding §3.2.1).
STRUCTURED_CONTENT_TYPE: Final = "application/cloudevents+json; charset=utf-8"
CONTENT_TYPE_ATTRIBUTE: Final = "Content-Type"
SOURCE_PREFIX: Final = "//cocoon-hibernation"


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


LIFECYCLE_TYPES: Final = frozenset(kind.ce_type for kind in LifecycleKind)


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

    @property
    def ordering_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def cloudevent(self) -> dict[str, Any]:
        """The structured-mode CloudEvent (JSON event format, specversion 1.0)."""
        return {
            "specversion": SPECVERSION,
            "type": self.type,
            "source": self.source,
            "subject": self.subject,
            "id": self.id,
            "time": rfc3339_millis(self.time),
            "datacontenttype": DATA_CONTENT_TYPE,
            "data": {
                "namespace": self.namespace,
                "name": self.name,
                "uid": self.uid,
                **self.details,
            },
        }

    def message(self) -> OutboundMessage:
        event = self.cloudevent()
        attributes = {
            CONTENT_TYPE_ATTRIBUTE: STRUCTURED_CONTENT_TYPE,
            # Duplicates of the body's context attributes, for subscription filters.
            **{f"ce-{key}": str(event[key]) for key in _MIRRORED},
        }
        data = json.dumps(event, separators=(",", ":"), sort_keys=True).encode()
        return OutboundMessage(data=data, ordering_key=self.ordering_key, attributes=attributes)


_MIRRORED = ("specversion", "type", "source", "subject", "id", "time")


def rfc3339_millis(value: datetime) -> str:
    t = value.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _random_id() -> str:
    return uuid.uuid4().hex


IdFactory = Callable[[], str]


def _occurrence(kind: LifecycleKind, cs: CocoonSet, *parts: str | None, fallback: IdFactory) -> str:
    uid = cs.metadata.uid
    if not uid or not parts or not all(parts):
        return fallback()
    return ":".join((kind.value, uid, *(p for p in parts if p)))


def _event(
    kind: LifecycleKind,
    cs: CocoonSet,
    *,
    id: str,
    now: datetime,
    details: Mapping[str, Any],
) -> LifecycleEvent:
    return LifecycleEvent(
        kind=kind,
        namespace=cs.namespace,
        name=cs.name,
        uid=cs.metadata.uid,
        id=id,
        time=now,
        details=dict(details),
    )


# --- the builders (pure) ---------------------------------------------------------------
# `cs` is the set as the write that caused the event returned it: its
# resourceVersion names the occurrence.


def released(
    cs: CocoonSet,
    *,
    deleted_pods: Sequence[str],
    hint: str,
    now: datetime,
    fallback_id: IdFactory = _random_id,
    occurrence: str | None = None,
) -> LifecycleEvent:
    """`occurrence`: the release round's durable identity (else the write's resourceVersion)."""
    kind = LifecycleKind.RELEASED
    return _event(
        kind,
        cs,
        id=_occurrence(kind, cs, occurrence or cs.metadata.resource_version, fallback=fallback_id),
        now=now,
        details={"deletedPods": sorted(deleted_pods), "hintNode": hint or None},
    )


def waking(
    cs: CocoonSet, *, hint: str, now: datetime, fallback_id: IdFactory = _random_id
) -> LifecycleEvent:
    kind = LifecycleKind.WAKING
    return _event(
        kind,
        cs,
        id=_occurrence(kind, cs, cs.metadata.resource_version, fallback=fallback_id),
        now=now,
        details={"hintNode": hint or None},
    )


def woken(
    cs: CocoonSet,
    *,
    placement: str,
    node: str | None,
    hint: str,
    now: datetime,
    fallback_id: IdFactory = _random_id,
    occurrence: str | None = None,
) -> LifecycleEvent:
    """`occurrence`: the wake's durable identity, the restored pod's uid."""
    kind = LifecycleKind.WOKEN
    return _event(
        kind,
        cs,
        id=_occurrence(kind, cs, occurrence or cs.metadata.resource_version, fallback=fallback_id),
        now=now,
        details={"placement": placement, "node": node or None, "hintNode": hint or None},
    )


def wake_no_capacity(
    cs: CocoonSet,
    *,
    pod: str,
    pod_uid: str,
    message: str,
    now: datetime,
    fallback_id: IdFactory = _random_id,
) -> LifecycleEvent:
    kind = LifecycleKind.WAKE_NO_CAPACITY
    # The situation, not a write: the same (pod, message) its Kubernetes Event is named after.
    digest = hashlib.sha256(message.encode()).hexdigest()[:16]
    return _event(
        kind,
        cs,
        id=_occurrence(kind, cs, pod_uid, digest, fallback=fallback_id),
        now=now,
        details={"pod": pod, "podUid": pod_uid or None, "message": message},
    )


def idle_suspended(
    cs: CocoonSet,
    *,
    idle_for: timedelta,
    timeout: timedelta,
    last_activity: datetime,
    now: datetime,
    fallback_id: IdFactory = _random_id,
) -> LifecycleEvent:
    kind = LifecycleKind.IDLE_SUSPENDED
    return _event(
        kind,
        cs,
        id=_occurrence(kind, cs, cs.metadata.resource_version, fallback=fallback_id),
        now=now,
        details={
            "idleSeconds": int(idle_for.total_seconds()),
            "idleTimeoutSeconds": int(timeout.total_seconds()),
            "lastActivity": rfc3339_millis(last_activity),
        },
    )


def seat_reclaimed(
    victim: CocoonSet,
    *,
    waker: str,
    pod_uid: str,
    idle_for: timedelta,
    pool: str,
    now: datetime,
    fallback_id: IdFactory = _random_id,
) -> LifecycleEvent:
    """About the victim (its seat is what moves); `waker` is `<ns>/<name>` of the wake."""
    kind = LifecycleKind.SEAT_RECLAIMED
    return _event(
        kind,
        victim,
        id=_occurrence(kind, victim, victim.metadata.resource_version, fallback=fallback_id),
        now=now,
        details={
            "reclaimedFor": waker,
            "wakePodUid": pod_uid or None,
            "idleSeconds": int(idle_for.total_seconds()),
            "pool": pool,
        },
    )


# --- publishing --------------------------------------------------------------------------


class LifecyclePublisher(Protocol):
    """What the executor and the sweep need of :class:`shared.clients.pubsub.PubSubPublisher`."""

    def publish(self, data: bytes, *, ordering_key: str, attributes: Mapping[str, str]) -> str:
        """Publish one message and wait for the server's id; raises only CocoonError types."""
        ...


def emit(publisher: LifecyclePublisher | None, event: LifecycleEvent) -> bool:
    """Publish `event` when a publisher is configured; best-effort, never raises CocoonError.

    True when the topic acknowledged it. A failure is a warning in the log: the
    Kubernetes Events and the counters are the record of what happened, and
    failing (or retrying) a reconcile whose writes already landed would not
    bring the lost event back.
    """
    if publisher is None:
        return False
    msg = event.message()
    try:
        message_id = publisher.publish(
            msg.data, ordering_key=msg.ordering_key, attributes=msg.attributes
        )
    except CocoonError as err:
        log.warning(
            "lifecycle event not published",
            cocoonset=event.subject,
            event_type=event.type,
            event_id=event.id,
            error=str(err),
            error_type=type(err).__name__,
        )
        return False
    log.debug(
        "lifecycle event published",
        cocoonset=event.subject,
        event_type=event.type,
        event_id=event.id,
        message_id=message_id,
    )
    return True


def publish(publisher: LifecyclePublisher | None, event: LifecycleEvent) -> None:
    """Publish an owed lifecycle event; a failure raises TransientError (the report stays owed).

    For effects whose report is durable (`released`, `woken`): the caller has
    not cleared the owed marker yet, so the redelivery publishes the same `id`
    again. No publisher configured = nothing owed.
    """
    if publisher is None:
        return
    msg = event.message()
    try:
        message_id = publisher.publish(
            msg.data, ordering_key=msg.ordering_key, attributes=msg.attributes
        )
    except CocoonError as err:
        raise TransientError(
            f"lifecycle event {event.type} {event.id} for {event.subject} not published: {err}"
        ) from err
    log.debug(
        "lifecycle event published",
        cocoonset=event.subject,
        event_type=event.type,
        event_id=event.id,
        message_id=message_id,
    )


class _FromSettings(Enum):
    FROM_SETTINGS = "from-settings"


# The default of every `publisher=` parameter: the process's publisher for
# `settings.events_topic`, or None (off) when the topic is unset.
FROM_SETTINGS: Final = _FromSettings.FROM_SETTINGS
PublisherArg = LifecyclePublisher | None | _FromSettings


def resolve_publisher(arg: PublisherArg, settings: Settings | None) -> LifecyclePublisher | None:
    """An explicit publisher (or None) as given; the default from `settings`, built lazily.

    Building the process's publisher imports nothing heavy: the Pub/Sub library
    loads on its first publish, so a run that emits nothing never pays for it.
    """
    if not isinstance(arg, _FromSettings):
        return arg
    if settings is None or settings.events_topic is None:
        return None
    from shared.clients import pubsub  # noqa: PLC0415 - only when a topic is configured

    return pubsub.get_publisher(settings.events_topic)
