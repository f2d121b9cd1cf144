"""What an adapter returns: the triggers kept and, for logs, why it dropped the rest.

Irrelevant input is a `Drop` with a reason, not an error; only unreadable input raises
(`MalformedEvent`, `InvalidName`: permanent, acknowledged, never retried).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, NamedTuple

from shared.errors import InvalidName, MalformedEvent
from shared.log import clip
from shared.triggers import SetChanged, SnapshotPushed, SweepTick, Trigger, WakeRequested


class DropReason(StrEnum):
    """Why an event (or one item of a batch) produced no trigger."""

    NOT_ACCEPTED = "type-not-accepted"  # the target does not take the type (docs/design.md#targets)
    UNKNOWN_TYPE = "unknown-type"
    NOT_PUSH = "not-a-push"  # pull, mount, delete, scan, ...
    PUSH_FAILED = "push-failed"  # ECR result FAILURE
    BLOB = "blob-push"  # a layer or config blob: never a tag
    UNTAGGED = "untagged"  # push by digest (index children, attestations)
    TAG = "tag-not-hibernate"
    NO_REGISTRY_BASE = "registry-base-unset"
    OUTSIDE_BASE = "repository-outside-base"
    NOT_A_VM = "not-an-agent-vm"
    NAMESPACE = "namespace-not-allowed"
    STAGE = "audit-stage"  # RequestReceived / ResponseStarted / Panic
    READ = "read-verb"
    VERB = "unknown-verb"
    REQUEST_FAILED = "request-failed"  # non-2xx audit status, non-OK gRPC status
    RESOURCE = "other-resource"
    SUBRESOURCE = "other-subresource"
    NOT_COCOONSET_POD = "pod-not-owned-by-a-cocoonset"
    NO_NAME = "no-object-name"
    SERVICE = "other-service"
    DUPLICATE = "duplicate"  # same trigger twice in one batch
    OVER_BUDGET = "over-budget"  # past the request's work bound (shared.adapters.budget): deferred
    INVALID_NAME = "invalid-name"
    MALFORMED = "malformed"


class Drop(NamedTuple):
    reason: DropReason
    detail: str
    event_id: str | None = None


def _dedupe_key(trigger: Trigger) -> tuple[object, ...]:
    # A batch often carries several writes to one set (patch, then status
    # update); one reconcile per set is enough since it re-reads live state.
    if isinstance(trigger, SetChanged | WakeRequested):
        return (type(trigger).__name__, trigger.ref)
    if isinstance(trigger, SnapshotPushed):
        return ("SnapshotPushed", trigger.repository, trigger.tag, trigger.digest)
    assert isinstance(trigger, SweepTick)
    return ("SweepTick", trigger.dry_run)


@dataclass(slots=True)
class Parsed:
    """Triggers kept (deduplicated, in arrival order; iterating a `Parsed` iterates them)
    and drops with their reasons."""

    triggers: list[Trigger] = field(default_factory=list)
    dropped: list[Drop] = field(default_factory=list)
    event_id: str | None = None
    kind: str = ""  # the detected format, for logs ("distribution", "k8s-audit", ...)

    def __iter__(self) -> Iterator[Trigger]:
        return iter(self.triggers)

    def __len__(self) -> int:
        return len(self.triggers)

    def add(self, trigger: Trigger) -> None:
        key = _dedupe_key(trigger)
        for i, t in enumerate(self.triggers):
            if _dedupe_key(t) != key:
                continue
            if isinstance(t, SetChanged) and isinstance(trigger, SetChanged) and t.report is None:
                # Keep the one reconcile, with the report time a later write carried.
                self.triggers[i] = replace(t, report=trigger.report)
            self.drop(DropReason.DUPLICATE, str(key[1:]), trigger.event_id)
            return
        self.triggers.append(trigger)

    def drop(self, reason: DropReason, detail: object = "", event_id: str | None = None) -> None:
        text = detail if isinstance(detail, str) else repr(detail)
        self.dropped.append(Drop(reason, clip(text), event_id or self.event_id))


def guarded(out: Parsed, event_id: str | None, item: Callable[[], None]) -> None:
    """Run one item of a batch: a permanent problem with it drops the item, not the batch."""
    try:
        item()
    except InvalidName as err:
        out.drop(DropReason.INVALID_NAME, str(err), event_id)
    except MalformedEvent as err:
        out.drop(DropReason.MALFORMED, str(err), event_id)


def show(value: object) -> str:
    """Untrusted JSON value as a clipped string for a log detail; never raises."""
    try:
        return clip(str(value))
    except ValueError:  # int too large to print (sys.set_int_max_str_digits)
        return f"<{type(value).__name__}>"


# --- reading untrusted JSON ---------------------------------------------------


def loads(body: bytes | bytearray | str, *, what: str) -> Any:
    """JSON from the wire; anything unreadable is a MalformedEvent."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise MalformedEvent(f"{what}: not JSON ({show(err)})") from None


def from_base64(value: object, *, what: str, expected: str) -> bytes:
    if not isinstance(value, str):
        raise MalformedEvent(f"{what} must be {expected}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as err:
        raise MalformedEvent(f"{what} is not base64: {err}") from None


def as_object(value: object, *, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedEvent(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def as_list(value: object, *, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise MalformedEvent(f"{what}: expected a JSON array, got {type(value).__name__}")
    return value


def opt_object(parent: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = parent.get(key)
    return None if value is None else as_object(value, what=key)


def opt_str(parent: Mapping[str, Any], key: str) -> str | None:
    """A string field that may be absent; empty counts as absent (ECR's untagged `""`)."""
    value = parent.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MalformedEvent(f"{key}: expected a string, got {type(value).__name__}")
    return value


def dig(value: object, *keys: str) -> Any:
    """`value[k1][k2]...`, or None where a level is missing or not a JSON object."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def opt_strs(parent: Mapping[str, Any], *keys: str) -> tuple[str | None, ...]:
    return tuple(opt_str(parent, key) for key in keys)


def event_id_of(parent: object, *keys: str) -> str | None:
    """The first id-like field present, as a clipped string (a log correlation id only)."""
    for key in keys:
        value = parent.get(key) if isinstance(parent, Mapping) else None
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return show(value)
    return None
