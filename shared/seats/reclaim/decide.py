"""Reclaiming an idle seat for a waiting wake, as pure decisions: a wake whose restore pod is
unschedulable may, past a grace from the first such observation of *that* pod, take the seat
of the longest-idle `reclaimable-after` set; its `seat-wait` record keeps one claim in flight."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta

from shared import constants as k
from shared.durations import format_rfc3339, parse_duration, parse_rfc3339
from shared.enums import CocoonSetPhase
from shared.models import CocoonSet
from shared.names import SetRef
from shared.sweep.decide import exempt_reason, measured_last_activity, parsed, steady

# Seats one wake may take in all: a cascade of suspends for a pod that never fits is refused.
MAX_RECLAIMS_PER_WAKE = 3
# However short the grace, a claim in flight gets this long to land and a freed seat this
# long to be bound (kube-scheduler's longest backoff for an unschedulable pod).
SETTLE_FLOOR = timedelta(seconds=10)


def set_key(cs: CocoonSet) -> str:
    return f"{cs.namespace}/{cs.name}"


def pool_of(cs: CocoonSet) -> str:
    return cs.spec.node_pool or k.DEFAULT_POOL


@dataclass(frozen=True, slots=True)
class SeatWait:
    """What a waiting wake remembers (annotation `seat-wait`, compact JSON)."""

    pod: str  # uid of the unschedulable restore pod: the wake's identity
    since: datetime  # first observation of that pod unschedulable
    victim: str | None = None  # `<ns>/<name>` of the set whose seat was claimed
    at: datetime | None = None  # when the claim was recorded
    freed: datetime | None = None  # first observation of the victim's seat released
    count: int = 0  # seats reclaimed for this wake so far

    def encode(self) -> str:
        out = {
            name: format_rfc3339(v) if isinstance(v, datetime) else str(v)
            for name, v in asdict(self).items()
            if v is not None and v != 0  # unset, or no seat reclaimed yet
        }
        return json.dumps(out, separators=(",", ":"), sort_keys=True)

    @classmethod
    def decode(cls, raw: str | None) -> SeatWait | None:
        """None for an absent or unreadable record (it is ours: rewritten from scratch)."""
        try:
            data = json.loads(raw or "")
            times = {t: parse_rfc3339(str(data[t])) for t in ("since", "at", "freed") if t in data}
            victim = str(data["victim"]) if "victim" in data else None
            return cls(
                str(data["pod"]), victim=victim, count=int(str(data.get("count", 0))), **times
            )
        except (ValueError, KeyError, TypeError):
            return None


# The steps of a wait. Stamp: the pod's first unschedulable observation, recorded (CAS) as
# the grace's start. Hold: nothing to do now. MarkFreed: record (CAS) when the victim's seat
# was first seen released. Search: past the grace, no reclaim in flight: claim a candidate.
@dataclass(frozen=True, slots=True)
class Stamp:
    wait: SeatWait


@dataclass(frozen=True, slots=True)
class Hold:
    reason: str


@dataclass(frozen=True, slots=True)
class MarkFreed:
    wait: SeatWait


@dataclass(frozen=True, slots=True)
class Search:
    wait: SeatWait
    exclude: frozenset[str] = frozenset()  # sets not to try (a victim whose release failed)

    @classmethod
    def again(cls, wait: SeatWait, exclude: frozenset[str] = frozenset()) -> Search:
        """A new search, the claim on the recorded victim given up (its count kept)."""
        return cls(replace(wait, victim=None, at=None, freed=None), exclude)


def recorded_victim(waker: CocoonSet, pod_uid: str) -> SetRef | None:
    """The victim the waker's record names for this pod (the caller re-reads it)."""
    wait = SeatWait.decode(waker.metadata.annotations.get(k.ANN_SEAT_WAIT))
    if wait is None or wait.pod != pod_uid or wait.victim is None or "/" not in wait.victim:
        return None
    return SetRef.parse(wait.victim)


def decide_wait(
    waker: CocoonSet,
    pod_uid: str,
    *,
    now: datetime,
    grace: timedelta,
    victim: CocoonSet | None = None,
) -> Stamp | Hold | MarkFreed | Search:
    """The next reclaim step for a waker whose restore pod `pod_uid` is unschedulable.
    `victim`: the victim the record names (`recorded_victim`) as re-read, None if gone."""
    wait = SeatWait.decode(waker.metadata.annotations.get(k.ANN_SEAT_WAIT))
    if wait is None or wait.pod != pod_uid:
        return Stamp(SeatWait(pod=pod_uid, since=now))
    if (waited := now - wait.since) < grace:
        return Hold(f"unschedulable for {_secs(waited)}, grace {_secs(grace)}")
    if wait.victim is None:
        return Search(wait)
    claimant = victim.metadata.annotations.get(k.ANN_RECLAIMED_BY) if victim else None
    if victim is not None and not (victim.suspended and claimant == set_key(waker)):
        # Our victim write never landed, or is landing now in a concurrent invocation:
        # wait one grace before giving the claim up, so no two seats are taken.
        if now - (wait.at or wait.since) < max(grace, SETTLE_FLOOR):
            return Hold(f"claim on {wait.victim} in flight")
        # The same set may be chosen again: it is judged afresh.
        return Search.again(wait)
    if victim is not None and victim.phase is CocoonSetPhase.FAILED:
        # `Failed` keeps the seat and nothing will release it: try the next candidate
        # (the count keeps the claim, so failures cannot cascade past the cap).
        return Search.again(wait, frozenset({wait.victim}))
    if victim is not None and victim.phase is not CocoonSetPhase.SUSPENDED:
        phase = victim.phase.value if victim.phase else "unset"
        return Hold(f"reclaim in flight: {wait.victim} is releasing its seat (phase {phase})")
    if wait.freed is None:
        return MarkFreed(replace(wait, freed=now))
    if (settled := now - wait.freed) < max(grace, SETTLE_FLOOR):
        return Hold(f"{wait.victim}'s seat was freed {_secs(settled)} ago: the scheduler's turn")
    if wait.count >= MAX_RECLAIMS_PER_WAKE:
        # Freed seats keep going elsewhere, or one is not enough for it: stop here.
        return Hold(f"already reclaimed {wait.count} seat(s) for this wake")
    # The freed seat went to someone else: this wake may reclaim once more.
    return Search.again(wait)


def _secs(value: timedelta) -> str:
    return f"{int(value.total_seconds())}s"


@dataclass(frozen=True, slots=True)
class Candidate:
    cs: CocoonSet
    idle_for: timedelta
    reclaimable_after: timedelta

    @property
    def ref(self) -> SetRef:
        return SetRef(self.cs.namespace, self.cs.name)

    @property
    def pool(self) -> str:
        return pool_of(self.cs)


def why_not(cs: CocoonSet, waker: CocoonSet, *, now: datetime) -> str | Candidate:
    """Why `cs` cannot give its seat to `waker` (a reason), or the candidate it is."""
    if (raw := cs.metadata.annotations.get(k.ANN_RECLAIMABLE_AFTER)) is None:
        return "not reclaimable"
    if set_key(cs) == set_key(waker):
        return "the waker itself"
    if not cs.is_release:
        # A retain set keeps its seat while suspended: taking it frees nothing.
        return "hibernatePolicy is not release"
    if cs.metadata.deletion_timestamp is not None:
        return "being deleted"
    if not steady(cs):
        return "not Running (or suspending, or waking)"
    if (after := parsed(parse_duration, raw)) is None:
        return "reclaimable-after does not parse"
    if (exempt := exempt_reason(cs, now=now)) is not None:
        return exempt
    if pool_of(cs) != pool_of(waker):
        return "another node pool"
    cls = waker.spec.snapshot_compatibility_class
    if cls and cs.spec.snapshot_compatibility_class != cls:
        return "another snapshot CPU class"
    if cs.spec.node_name and cs.spec.node_name != waker.spec.node_name:
        # Its own wake could only use that node: its next wake would be the hard one.
        return "pinned to another node"
    if waker.spec.node_name and cs.spec.node_name != waker.spec.node_name:
        # Without a pod list, the only set known to be on that node is one pinned there.
        return "not on the waker's pinned node"
    if (last := measured_last_activity(cs)) is None:
        return "no readable activity stamp"
    idle_for = now - last
    if idle_for < after:
        return f"idle {_secs(idle_for)}, reclaimable after {_secs(after)}"
    return Candidate(cs=cs, idle_for=idle_for, reclaimable_after=after)


def choose_victim(
    waker: CocoonSet,
    sets: Iterable[CocoonSet],
    *,
    now: datetime,
    exclude: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """Every candidate for `waker`, best first: longest idle, then namespace/name."""
    judged = (why_not(cs, waker, now=now) for cs in sets if set_key(cs) not in exclude)
    found = [c for c in judged if isinstance(c, Candidate)]
    return sorted(found, key=lambda c: (-c.idle_for.total_seconds(), c.cs.namespace, c.cs.name))


def older_waiter_first(
    waker: CocoonSet,
    wait: SeatWait,
    cand: Candidate,
    others: Iterable[CocoonSet],
    *,
    now: datetime,
    grace: timedelta,
) -> str | None:
    """The longer-waiting wake that should take `cand` before `waker` does, or None: past
    its grace, no reclaim in flight, not at the cap, and `cand` fits it (records only)."""
    mine = (wait.since, waker.namespace, waker.name)
    for other in others:
        waking = other.phase is CocoonSetPhase.WAKING and not other.suspended
        if not waking or set_key(other) == set_key(waker):
            continue
        theirs = SeatWait.decode(other.metadata.annotations.get(k.ANN_SEAT_WAIT))
        if theirs is None or theirs.victim is not None or theirs.count >= MAX_RECLAIMS_PER_WAKE:
            continue
        if now - theirs.since < grace or (theirs.since, other.namespace, other.name) >= mine:
            continue
        if isinstance(why_not(cand.cs, other, now=now), Candidate):
            return set_key(other)
    return None
