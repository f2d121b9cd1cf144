"""The sweep's decisions: pure functions of a set as listed (and, for a few, its pods). A bad
idle annotation is warned about once per value (its fingerprint is recorded on the set); the
safety net picks exactly the sets an event would have reconciled."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from shared import constants as k
from shared.durations import parse_duration, parse_rfc3339
from shared.enums import CocoonSetPhase
from shared.log import clip
from shared.models import CocoonSet, Pod
from shared.names import SetRef, is_label_value

T = TypeVar("T")
# Annotation values are user input: a fingerprint stored back on the set stays small.
_FINGERPRINT_VALUE_MAX = 120


class IdleState(StrEnum):
    NOT_OPTED_IN = "not-opted-in"  # no idle-timeout annotation
    NOT_ELIGIBLE = "not-eligible"  # not Running, already suspended, or a wake in flight
    BAD_CONFIG = "bad-config"  # an idle annotation does not parse: skip (and warn once)
    EXEMPT = "exempt"  # idle-exempt-until is in the future
    ACTIVE = "active"  # idle for less than the timeout
    IDLE = "idle"  # idle for at least the timeout: suspend (subject to the cap)


@dataclass(frozen=True, slots=True)
class IdleEval:
    state: IdleState
    timeout: timedelta | None = None
    last_activity: datetime | None = None
    idle_for: timedelta | None = None
    fingerprint: str = ""  # the bad values (not the parse messages), for warn-once


class SafetyNeed(StrEnum):
    """Why the safety net looks at a set: the entry condition an event would have acted on."""

    RELEASE_PENDING = "release-pending"  # release + suspend, not yet Suspended
    SUSPENDED_CHECK = "suspended-check"  # release + suspend + Suspended: only if pods are left
    WAKE_PENDING = "wake-pending"  # release, unsuspended while Suspended(/ing with the hint)
    WAKING = "waking"  # any policy: a policy edit must not strand a restore
    UNFINISHED_WAKE = "unfinished-wake"  # release, unsuspended, hint still set
    REPORT_OWED = "report-owed"  # a SeatReleased or WakeCompleted a crash left owed


class ConfigAction(StrEnum):
    WARN = "warn"  # new bad value(s): record the fingerprint (CAS) and emit one Warning
    CLEAR = "clear"  # the recorded bad value is gone: drop the record (CAS)


@dataclass(frozen=True, slots=True)
class IdleCandidate:
    ref: SetRef
    resource_version: str
    release: bool
    idle_for: timedelta
    timeout: timedelta
    last_activity: datetime

    def __lt__(self, other: IdleCandidate) -> bool:
        """The cap's ranking: 'less' is a worse candidate (shorter idle, then later name)."""
        if self.idle_for != other.idle_for:
            return self.idle_for < other.idle_for
        return (self.ref.namespace, self.ref.name) > (other.ref.namespace, other.ref.name)


@dataclass(frozen=True, slots=True)
class SetDecision:
    ref: SetRef
    idle: IdleEval
    candidate: IdleCandidate | None = None  # idle past its timeout: suspend (subject to the cap)
    config: ConfigAction | None = None
    safety: SafetyNeed | None = None


@dataclass(frozen=True, slots=True)
class WakeTimeout:
    key: str  # the wake's identity, stored in ANN_WAKE_TIMEOUT_REPORTED
    message: str


def problem(key: str, raw: str) -> str:
    """One bad annotation value as a warn-once fingerprint records it."""
    return f"{key.rsplit('/', 1)[-1]}={clip(raw, _FINGERPRINT_VALUE_MAX)}"


def evaluate_idle(cs: CocoonSet, *, now: datetime) -> IdleEval:
    """Whether `cs` is idle past its timeout, from its annotations alone."""
    ann = cs.metadata.annotations
    if (raw_timeout := ann.get(k.ANN_IDLE_TIMEOUT)) is None:
        return IdleEval(IdleState.NOT_OPTED_IN)

    problems: list[str] = []
    if (timeout := parsed(parse_duration, raw_timeout)) is None:
        problems.append(problem(k.ANN_IDLE_TIMEOUT, raw_timeout))

    for key in (k.ANN_LAST_ACTIVITY, k.ANN_LAST_WAKE, k.ANN_IDLE_EXEMPT_UNTIL):
        if (raw := ann.get(key)) is not None and read_time(raw) is None:
            problems.append(problem(key, raw))
    if problems:
        # Config is judged whatever the phase: a user learns of a typo before it matters.
        return IdleEval(IdleState.BAD_CONFIG, fingerprint=";".join(problems))
    assert timeout is not None

    if not steady(cs) or (last := measured_last_activity(cs)) is None:
        return IdleEval(IdleState.NOT_ELIGIBLE, timeout=timeout)
    idle_for = now - last
    if exempt_reason(cs, now=now) is not None:
        state = IdleState.EXEMPT
    else:
        state = IdleState.IDLE if idle_for >= timeout else IdleState.ACTIVE
    return IdleEval(state, timeout=timeout, last_activity=last, idle_for=idle_for)


def parsed(parse: Callable[[str], T], raw: object) -> T | None:
    """`parse(raw)`, or None when `raw` is not a string or does not parse (ValueError)."""
    if not isinstance(raw, str):
        return None
    try:
        return parse(raw)
    except ValueError:
        return None


def read_time(raw: str | None) -> datetime | None:
    """An RFC 3339 value, or None when it is absent or does not parse."""
    return parsed(parse_rfc3339, raw)


def exempt_reason(cs: CocoonSet, *, now: datetime) -> str | None:
    """Why `idle-exempt-until` protects `cs` from an idle, scheduled or reclaim suspend now."""
    if (raw := cs.metadata.annotations.get(k.ANN_IDLE_EXEMPT_UNTIL)) is None:
        return None
    if (until := read_time(raw)) is None:
        return "idle-exempt-until does not parse"
    return "idle-exempt-until is in the future" if now < until else None


def steady(cs: CocoonSet) -> bool:
    """Running, not suspended, no wake in flight: the only state idleness is measured in
    (suspending mid-restore would snapshot a VM that is still restoring)."""
    return cs.phase is CocoonSetPhase.RUNNING and not cs.suspended and not cs.hint


def measured_last_activity(cs: CocoonSet) -> datetime | None:
    """The idle clock: the latest of `last-activity`, the last wake and the creation.
    None when a stamp does not parse or none is there: never act on a guess."""
    stamps: list[datetime] = []
    for key in (k.ANN_LAST_ACTIVITY, k.ANN_LAST_WAKE):
        if (raw := cs.metadata.annotations.get(key)) is None:
            continue
        if (stamp := read_time(raw)) is None:
            return None
        stamps.append(stamp)
    # Set by the API server, never user input: an unparseable one is just ignored.
    if (created := read_time(cs.metadata.creation_timestamp)) is not None:
        stamps.append(created)
    return max(stamps, default=None)


def config_action(recorded: str | None, fingerprint: str) -> ConfigAction | None:
    """Warn once per bad value: `recorded` is the fingerprint last warned about."""
    if fingerprint:
        return None if recorded == fingerprint else ConfigAction.WARN
    return ConfigAction.CLEAR if recorded is not None else None


def safety_need(cs: CocoonSet) -> SafetyNeed | None:
    phase, ann = cs.phase, cs.metadata.annotations
    if ann.get(k.ANN_WAKE_REPORT_OWED):
        return SafetyNeed.REPORT_OWED
    if phase is CocoonSetPhase.WAKING:
        return SafetyNeed.WAKING
    if not cs.is_release:
        return None
    if cs.suspended:
        if phase is CocoonSetPhase.SUSPENDED:
            # A stamped release round whose SeatReleased is not reported yet.
            if (rnd := ann.get(k.ANN_RELEASE_ROUND)) and ann.get(k.ANN_RELEASE_REPORTED) != rnd:
                return SafetyNeed.REPORT_OWED
            return SafetyNeed.SUSPENDED_CHECK
        if phase is CocoonSetPhase.FAILED:
            return None  # the operator's to triage; releasing it would hide the failure
        return SafetyNeed.RELEASE_PENDING
    if phase is CocoonSetPhase.SUSPENDED or (phase is CocoonSetPhase.SUSPENDING and cs.hint):
        return SafetyNeed.WAKE_PENDING
    if cs.hint and phase is not CocoonSetPhase.SUSPENDING:
        return SafetyNeed.UNFINISHED_WAKE
    return None


def pods_left(pods: Iterable[Pod]) -> bool:
    """Pods the release still has to act on (terminal ones are kept for triage)."""
    return any(not p.terminating and not p.terminal for p in pods)


def check_wake_deadline(
    cs: CocoonSet, pods: Sequence[Pod], *, now: datetime, deadline: timedelta
) -> WakeTimeout | None:
    """A `WakeTimedOut` due for a Waking set, or None (once per wake: keyed by its identity).
    The wake started at `wake-started`, else at the restore pod's creation; a live main
    pod is a wake about to complete, not a stuck one."""
    if cs.phase is not CocoonSetPhase.WAKING:
        return None
    restore = (p for p in pods if p.is_main and p.annotations.get(k.ANN_RESTORE) == k.TRUE)
    main = next((p for p in restore if not p.terminating), None)
    if main is not None and main.live:
        return None
    raw_started = cs.metadata.annotations.get(k.ANN_WAKE_STARTED)
    started, key = read_time(raw_started), f"started:{raw_started}"
    if started is None and main is not None:
        started = read_time(main.metadata.creation_timestamp)
        key = f"pod:{main.metadata.uid or main.name}"
    if started is None or now - started <= deadline:
        return None
    if cs.metadata.annotations.get(k.ANN_WAKE_TIMEOUT_REPORTED) == key:
        return None
    if main is None:
        why = "the main pod does not exist yet"
    elif (unschedulable := main.unschedulable_message()) is not None:
        why = f"the main pod is unschedulable: {unschedulable or 'no message'}"
    else:
        why = "the restored VM is not live yet"
    message = (
        f"wake has not completed after {format_duration(now - started)} "
        f"(deadline {format_duration(deadline)}): {why}; still waiting"
    )
    return WakeTimeout(key=key, message=message)


def decide_set(cs: CocoonSet, *, now: datetime) -> SetDecision:
    idle = evaluate_idle(cs, now=now)
    ref = SetRef(cs.namespace, cs.name)
    candidate = None
    if idle.state is IdleState.IDLE:
        assert idle.idle_for is not None and idle.timeout is not None
        assert idle.last_activity is not None
        rv = cs.metadata.resource_version or ""
        candidate = IdleCandidate(
            ref, rv, cs.is_release, idle.idle_for, idle.timeout, idle.last_activity
        )
    config = config_action(cs.metadata.annotations.get(k.ANN_IDLE_CONFIG_ERROR), idle.fingerprint)
    return SetDecision(ref, idle, candidate, config, safety_need(cs))


@dataclass(slots=True)
class IdleQueue:
    """The `cap` longest-idle candidates seen so far, page by page, in O(cap) memory."""

    cap: int
    deferred: int = 0
    _heap: list[IdleCandidate] = field(default_factory=list)

    def offer(self, cand: IdleCandidate) -> None:
        if len(self._heap) < self.cap:
            heapq.heappush(self._heap, cand)
            return
        self.deferred += 1
        if self._heap and self._heap[0] < cand:
            heapq.heapreplace(self._heap, cand)

    def __len__(self) -> int:
        return len(self._heap)

    def drain(self) -> list[IdleCandidate]:
        """Longest idle first (ties by namespace/name)."""
        out = sorted(self._heap, reverse=True)
        self._heap.clear()
        return out


def unlabelable(names: Iterable[str]) -> list[str]:
    """The set names `name_selectors` leaves out: too long for a label value, so such a
    set has no labelled pods, and one such value would make the whole selector a 400."""
    return sorted({n for n in names if not (n and is_label_value(n))})


def name_selectors(names: Iterable[str], *, max_chars: int = 4000) -> list[str]:
    """Set-based label selectors (`name in (a,b)`) covering `names`, each at most ~max_chars:
    one pod list per chunk instead of one per set, the request line under proxy limits."""
    prefix = f"{k.LABEL_SET_NAME} in ("
    chunks: list[list[str]] = []
    size = max_chars  # full: the first name starts a chunk
    for name in sorted({n for n in names if n and is_label_value(n)}):
        if size + len(name) + 1 > max_chars:
            chunks.append([])
            size = len(prefix) + 1
        chunks[-1].append(name)
        size += len(name) + 1
    return [prefix + ",".join(chunk) + ")" for chunk in chunks]


def format_duration(value: timedelta) -> str:
    """`1h2m3s`-style, whole seconds (what users write in idle-timeout)."""
    h, rem = divmod(max(int(value.total_seconds()), 0), 3600)
    m, s = divmod(rem, 60)
    return "".join(f"{n}{unit}" for n, unit in ((h, "h"), (m, "m"), (s, "s")) if n) or "0s"
