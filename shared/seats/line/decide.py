"""Fair order among waiting wakes, as pure decisions. kube-scheduler binds pending pods in no
fair order but ignores a gated pod: a restore pod is created gated behind an older waiter known
to be stuck, and ungated once nobody stuck is ahead of it (see `covers` for "ahead")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from fractions import Fraction
from typing import Any, Final

from shared import constants as k
from shared.models import Pod
from shared.quantity import parse_quantity
from shared.sweep.decide import parsed, read_time

# A pod the scheduler has not judged this long after it became schedulable is taken to be
# out of its hands (another scheduler, a broken one): waiting behind it could be forever.
STALE_PENDING: Final = timedelta(seconds=60)


class State(StrEnum):
    GATED = "gated"  # held by our gate: not considered by the scheduler
    BLOCKED = "unschedulable"  # the scheduler tried and found no seat
    PENDING = "pending"  # schedulable, not judged yet (just created or ungated)


@dataclass(frozen=True, slots=True)
class Waiter:
    """One unbound restore pod in a line."""

    namespace: str
    name: str
    uid: str
    since: datetime  # its wake's request time: its place in the line
    pool: str
    cpu_class: str | None
    pin: str | None  # the one node a required node affinity allows, if any
    requests: Mapping[str, Fraction]
    state: State
    gates: tuple[str, ...] = ()  # every gate on the pod (another controller's too)
    schedulable_since: datetime | None = None  # PENDING: created, or ungated, at

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def place(self) -> tuple[datetime, str, str]:
        return (self.since, self.namespace, self.name)


def _requests(spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """The pod's summed container requests (limits stand in, as the API server defaults)."""
    out: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        if not isinstance(c, Mapping):
            continue
        res = c.get("resources") or {}
        req = dict(res.get("limits") or {}) | dict(res.get("requests") or {})
        for name, raw in req.items():
            if (q := parsed(parse_quantity, str(raw))) is not None:
                out[name] = out.get(name, Fraction(0)) + q.unscaled * Fraction(10) ** q.scale
    return out


def _pin(spec: Mapping[str, Any]) -> str | None:
    """The single hostname a required node affinity allows (how a wake pins), or None."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    exprs = (terms[0].get("matchExpressions") or []) if len(terms) == 1 else []
    match exprs:
        case [{"key": k.LABEL_HOSTNAME, "operator": "In", "values": [value]}]:
            return str(value)
    return None


def waiter_of(pod: Pod) -> Waiter | None:
    """The pod as a member of its pool's line, or None (bound, leaving, not in a line)."""
    pool = pod.labels.get(k.LABEL_SEAT_LINE)
    if not pool or pod.spec.node_name or pod.terminating:
        return None
    spec: Mapping[str, Any] = pod.spec.model_dump(by_alias=True)
    created = read_time(pod.metadata.creation_timestamp)
    since = read_time(pod.annotations.get(k.ANN_QUEUED_AT)) or created
    if since is None:
        return None
    if k.GATE_SEAT_ORDER in pod.scheduling_gates:
        state = State.GATED
    else:
        state = State.BLOCKED if pod.unschedulable_message() is not None else State.PENDING
    return Waiter(
        namespace=pod.metadata.namespace or "",
        name=pod.name,
        uid=pod.metadata.uid or "",
        since=since,
        pool=pool,
        cpu_class=(spec.get("nodeSelector") or {}).get(k.LABEL_SNAPSHOT_CPU_CLASS) or None,
        pin=_pin(spec),
        requests=_requests(spec),
        state=state,
        gates=pod.scheduling_gates,
        schedulable_since=read_time(pod.annotations.get(k.ANN_UNGATED_AT)) or created,
    )


def covers(older: Waiter, younger: Waiter) -> bool:
    """Could `older` take every seat `younger` could (same pool, no narrower CPU class or
    pin, no larger requests)? Then a gate never holds a pod a freed seat fits."""
    if older.pool != younger.pool:
        return False
    if older.cpu_class not in (None, younger.cpu_class) or older.pin not in (None, younger.pin):
        return False
    return all(v <= younger.requests.get(name, Fraction(0)) for name, v in older.requests.items())


def ahead(other: Waiter, me: Waiter) -> bool:
    return other.uid != me.uid and other.place < me.place and covers(other, me)


def _holds(other: Waiter, now: datetime) -> bool:
    """Does `other` hold the line for those behind it (as they see it now)?"""
    started = other.schedulable_since
    return other.state is not State.PENDING or started is None or now - started < STALE_PENDING


def gate_at_create(me: Waiter, line: Iterable[Waiter]) -> Waiter | None:
    """The older waiter *known* to be stuck a new restore pod is created gated behind, or
    None: a line forms only once a pool is seen full."""
    stuck = [w for w in line if ahead(w, me) and w.state is not State.PENDING]
    return min(stuck, key=lambda w: w.place, default=None)


def blocker(me: Waiter, line: Iterable[Waiter], *, now: datetime) -> Waiter | None:
    """The oldest waiter ahead of a gated pod that keeps it gated, or None (ungate it)."""
    holding = [w for w in line if ahead(w, me) and _holds(w, now)]
    return min(holding, key=lambda w: w.place, default=None)


@dataclass(frozen=True, slots=True)
class Ungate:
    waiter: Waiter


@dataclass(frozen=True, slots=True)
class KeepGated:
    waiter: Waiter
    behind: Waiter


def advance(line: Sequence[Waiter], *, now: datetime) -> list[Ungate | KeepGated]:
    """What to do with every gated pod of a line, oldest first. A pod ungated in this pass
    is PENDING for those after it: one pass never releases two pods for one seat."""
    current = {w.uid: w for w in line}
    out: list[Ungate | KeepGated] = []
    for w in sorted(line, key=lambda x: x.place):
        if w.state is not State.GATED:
            continue
        if (behind := blocker(w, current.values(), now=now)) is None:
            out.append(Ungate(w))
            current[w.uid] = replace(w, state=State.PENDING, schedulable_since=now)
        else:
            out.append(KeepGated(w, behind))
    return out


def position(me: Waiter, line: Iterable[Waiter]) -> int:
    """1 + how many waiters are ahead of `me` (for the status view and the log)."""
    return 1 + sum(1 for w in line if ahead(w, me))


def gate_removal(uid: str, gates: Sequence[str], *, now: datetime) -> dict[str, Any]:
    """A merge patch removing only our gate, under a uid precondition. Re-adding a gate
    another controller removed meanwhile is refused (422): the next reconcile re-reads."""
    rest = [{"name": g} for g in gates if g != k.GATE_SEAT_ORDER]
    return {
        "metadata": {"uid": uid, "annotations": {k.ANN_UNGATED_AT: micro(now)}},
        "spec": {"schedulingGates": rest or None},
    }


def micro(value: datetime) -> str:
    # Microseconds: wakes requested within one second still keep their order.
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def queued_at(wake_started: str | None, *, now: datetime) -> datetime:
    """A restore pod's place: its wake's request time when older than now (a pod recreated
    during a long wait keeps its place)."""
    if (started := read_time(wake_started)) is not None and now - started >= timedelta(seconds=1):
        return started
    return now


def join_line(
    body: dict[str, Any], *, pool: str, queued_at: datetime, gate: bool
) -> dict[str, Any]:
    """The restore pod's manifest with its place in the line (and the gate, if due)."""
    meta = body["metadata"]
    meta["labels"] = {**meta.get("labels", {}), k.LABEL_SEAT_LINE: pool}
    meta["annotations"] = {**meta.get("annotations", {}), k.ANN_QUEUED_AT: micro(queued_at)}
    if gate:
        body["spec"]["schedulingGates"] = [{"name": k.GATE_SEAT_ORDER}]
    return body
