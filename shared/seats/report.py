"""The seat view of `cocoon-hibernation status`, a pure function of what was listed: per
pool, the seats used (bound pods; nodes are not read), the wakes waiting with their age and
place in line, and the sets that may give their seat with their idle time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from shared import constants as k
from shared.durations import parse_duration
from shared.enums import CocoonSetPhase
from shared.models import CocoonSet, Pod
from shared.seats.line.decide import Waiter, position, waiter_of
from shared.seats.reclaim.decide import SeatWait, pool_of, set_key
from shared.sweep.decide import measured_last_activity, parsed, read_time, steady


@dataclass(frozen=True, slots=True)
class Waiting:
    set: str
    age_seconds: int
    victim: str  # the set whose seat it reclaimed, "" when none (yet)
    # Its restore pod's state in the pool's line and 1 + how many are ahead; "", 0: no line.
    line: str = ""
    position: int = 0


@dataclass(frozen=True, slots=True)
class Reclaimable:
    set: str
    idle_seconds: int
    reclaimable_after_seconds: int
    eligible: bool  # idle long enough (and Running, not exempt) to be taken now


@dataclass(slots=True)
class PoolSeats:
    pool: str
    used: int = 0
    waiting: list[Waiting] = field(default_factory=list)
    reclaimable: list[Reclaimable] = field(default_factory=list)


def seat_view(sets: Iterable[CocoonSet], pods: Iterable[Pod], *, now: datetime) -> list[PoolSeats]:
    sets = list(sets)
    pools: dict[str, PoolSeats] = {}
    pool_of_set = {(cs.namespace, cs.name): pool_of(cs) for cs in sets}
    in_line: dict[str, Waiter] = {}
    for pod in pods:
        key = (pod.metadata.namespace or "", pod.labels.get(k.LABEL_SET_NAME, ""))
        if pod.is_main and (waiter := waiter_of(pod)) is not None:
            in_line[f"{key[0]}/{key[1]}"] = waiter
        # A bound pod holds its seat until it is gone (terminating included).
        if (pool := pool_of_set.get(key)) is not None and pod.spec.node_name and not pod.terminal:
            pools.setdefault(pool, PoolSeats(pool)).used += 1
    for cs in sets:
        entry = pools.setdefault(pool_of(cs), PoolSeats(pool_of(cs)))
        if cs.phase is CocoonSetPhase.WAKING:
            wait = SeatWait.decode(cs.metadata.annotations.get(k.ANN_SEAT_WAIT))
            raw_started = cs.metadata.annotations.get(k.ANN_WAKE_STARTED)
            started = wait.since if wait is not None else read_time(raw_started)
            me = in_line.get(set_key(cs))
            entry.waiting.append(
                Waiting(
                    set=set_key(cs),
                    age_seconds=int((now - started).total_seconds()) if started else 0,
                    victim=(wait.victim or "") if wait is not None else "",
                    line=me.state.value if me is not None else "",
                    position=position(me, in_line.values()) if me is not None else 0,
                )
            )
        after = parsed(parse_duration, cs.metadata.annotations.get(k.ANN_RECLAIMABLE_AFTER))
        last = measured_last_activity(cs)
        if after is None or last is None or not cs.is_release or not steady(cs):
            continue
        idle = now - last
        entry.reclaimable.append(
            Reclaimable(
                set=set_key(cs),
                idle_seconds=int(idle.total_seconds()),
                reclaimable_after_seconds=int(after.total_seconds()),
                eligible=idle >= after,
            )
        )
    for entry in pools.values():
        entry.waiting.sort(key=lambda w: (-w.age_seconds, w.set))
        entry.reclaimable.sort(key=lambda r: (-r.idle_seconds, r.set))
    return [pools[p] for p in sorted(pools)]
