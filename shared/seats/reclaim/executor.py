"""Performing a seat reclaim for a waiting wake (decisions in `decide.py`). Two CAS writes in
order: the waker's `seat-wait` names the victim (one reclaim per wake), then the victim gets
`suspend=true` and `seat-reclaimed-by` on the listed version (two wakes never share a victim)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from shared import constants as k
from shared import lifecycle, log
from shared.config import Settings
from shared.errors import AdmissionDenied, CocoonError, Conflict, NotFound
from shared.lifecycle import LifecyclePublisher
from shared.models import CocoonSet
from shared.names import SetRef
from shared.ports import KubeApi, SetLister
from shared.refusal import report_refusal
from shared.seats.activity import Activity, cpu_by_pod, evaluate_activity
from shared.seats.reclaim.decide import (
    Candidate,
    Hold,
    MarkFreed,
    SeatWait,
    Stamp,
    choose_victim,
    decide_wait,
    older_waiter_first,
    recorded_victim,
    set_key,
    why_not,
)
from shared.sweep.decide import format_duration

# Candidates tried per search; past this, the next run searches again from fresh state.
MAX_TRIES = 5
# How long one search's list serves the others in this process (a sweep reconciles every
# waiting wake in one run). Stale is safe: the victim's suspend is a CAS on its version.
CANDIDATE_TTL_SECONDS = 2.0

# The victim's release, started by the reconciler now rather than on its next event.
StartRelease = Callable[[SetRef], object]


_SEARCHED = {k.ANN_RECLAIMABLE_AFTER, k.ANN_SEAT_WAIT}
_LOCK = threading.Lock()
# scopes -> (when listed, the sets a search reads)
_LISTED: dict[tuple[str | None, ...], tuple[float, list[CocoonSet]]] = {}


def _reclaimable(kube: SetLister, scopes: list[str | None]) -> list[CocoonSet]:
    key = (*scopes,)
    with _LOCK:
        hit = _LISTED.get(key)
        if hit is not None and time.monotonic() - hit[0] < CANDIDATE_TTL_SECONDS:
            return hit[1]
    sets: list[CocoonSet] = []
    for scope in scopes:
        for page in kube.list_sets(scope):
            # Only what a search reads (candidates, waiting wakes): memory stays small.
            sets.extend(cs for cs in page if _SEARCHED & cs.metadata.annotations.keys())
    with _LOCK:
        _LISTED[key] = (time.monotonic(), sets)
    return sets


def _remember(*updated: CocoonSet) -> None:
    """What this process just wrote, seen by its next search without waiting a TTL."""
    by_key = {set_key(cs): cs for cs in updated}
    with _LOCK:
        for _, sets in _LISTED.values():
            for i, cs in enumerate(sets):
                sets[i] = by_key.get(set_key(cs), cs)


def forget_candidates() -> None:
    """Drop the cached candidate lists (for tests)."""
    with _LOCK:
        _LISTED.clear()


@dataclass(frozen=True, slots=True)
class ReclaimResult:
    action: str  # stamped | held | freed | reclaimed | none | conflict | off
    detail: str


def _write_wait(kube: KubeApi, waker: CocoonSet, wait: SeatWait) -> CocoonSet:
    return kube.patch_set(
        SetRef(waker.namespace, waker.name),
        {"metadata": {"annotations": {k.ANN_SEAT_WAIT: wait.encode()}}},
        resource_version=waker.metadata.resource_version,
    )


def reclaim_for(
    waker: CocoonSet,
    pod_uid: str,
    *,
    kube: KubeApi,
    settings: Settings,
    now: datetime,
    publisher: LifecyclePublisher | None,
    start_release: StartRelease | None = None,
) -> ReclaimResult:
    """One step of the reclaim for `waker`, whose restore pod `pod_uid` is unschedulable.
    Raises CocoonError; a lost compare-and-swap is an answer ("conflict")."""
    if (grace := settings.seat_reclaim_grace) is None:
        return ReclaimResult("off", "COCOON_SEAT_RECLAIM_GRACE=off")
    victim_ref = recorded_victim(waker, pod_uid)
    victim = kube.get_set(victim_ref) if victim_ref is not None else None
    step = decide_wait(waker, pod_uid, now=now, grace=grace, victim=victim)
    if isinstance(step, Hold):
        return ReclaimResult("held", step.reason)
    if isinstance(step, Stamp | MarkFreed):
        try:
            _write_wait(kube, waker, step.wait)
        except Conflict:
            return ReclaimResult("conflict", "the waker changed meanwhile")
        if isinstance(step, Stamp):
            return ReclaimResult("stamped", f"unschedulable since {step.wait.since.isoformat()}")
        return ReclaimResult("freed", f"{step.wait.victim}'s seat is free")
    sets = _reclaimable(kube, settings.scopes)
    candidates = choose_victim(waker, sets, now=now, exclude=step.exclude)
    if not candidates:
        log.info(
            "seat reclaim: no reclaimable seat fits the waiting wake",
            namespace=waker.namespace,
            cocoonset=waker.name,
            pool=waker.spec.node_pool,
        )
        return ReclaimResult("none", "no reclaimable set fits")
    current, wait = waker, step.wait
    for cand in candidates[:MAX_TRIES]:
        first = older_waiter_first(waker, wait, cand, sets, now=now, grace=grace)
        if first is not None:
            # Fair order: the longest waiting wake this seat fits reclaims it first.
            return ReclaimResult("held", f"{first} has waited longer for a seat like {cand.ref}")
        if (why := _cpu_says_keep(kube, cand, now)) is not None:
            log.info("seat reclaim: candidate skipped", victim=str(cand.ref), reason=why)
            continue
        claim = replace(wait, victim=set_key(cand.cs), at=now, freed=None, count=wait.count + 1)
        try:
            current = _write_wait(kube, current, claim)
        except Conflict:
            # Another invocation for this wake is claiming (or the set moved on).
            return ReclaimResult("conflict", "another invocation is reclaiming for this wake")
        taken = _suspend_victim(kube, cand, current, now)
        _remember(current, *([taken] if taken is not None else []))
        if taken is None:
            continue
        _report(kube, current, taken, cand, pod_uid, now=now, publisher=publisher)
        log.observe(k.METRIC_RECLAIM_GRACE, (now - wait.since).total_seconds(), pool=cand.pool)
        if start_release is not None:
            try:
                start_release(cand.ref)
            except CocoonError as err:
                # The suspend is durable: the release's events, or the sweep, finish it.
                log.warning(
                    "seat reclaim: the victim's release did not start now",
                    namespace=cand.cs.namespace,
                    cocoonset=cand.cs.name,
                    error=str(err),
                )
        return ReclaimResult("reclaimed", f"suspended {cand.ref}")
    return ReclaimResult("conflict", "every candidate changed meanwhile")


def _cpu_says_keep(kube: KubeApi, cand: Candidate, now: datetime) -> str | None:
    """For a set measured by CPU, why to keep it (busy now, or no data), else None: its
    `last-activity` is refreshed only every tenth of a timeout, so ask PodMetrics."""
    if k.ANN_IDLE_CPU_BELOW not in cand.cs.metadata.annotations:
        return None
    selector = f"{k.LABEL_SET_NAME}={cand.cs.name},{k.LABEL_ROLE}={k.ROLE_MAIN}"
    try:
        items = kube.list_pod_metrics(cand.cs.namespace, selector)
    except CocoonError as err:
        return f"PodMetrics unavailable ({type(err).__name__})"
    usage = next(iter(cpu_by_pod(items).values()), None)
    state = evaluate_activity(cand.cs, usage, now=now).state
    if state is Activity.BAD_CONFIG:
        return "idle-cpu-below does not parse: its activity cannot be measured"
    if state is Activity.UNKNOWN:
        return "no PodMetrics for its main pod: never suspended on missing data"
    if state in (Activity.ACTIVE, Activity.REFRESH):
        return "its VM is busy (CPU at or above idle-cpu-below)"
    return None


def _suspend_victim(
    kube: KubeApi, cand: Candidate, waker: CocoonSet, now: datetime
) -> CocoonSet | None:
    patch = {
        "metadata": {"annotations": {k.ANN_RECLAIMED_BY: set_key(waker)}},
        "spec": {"suspend": True},
    }
    cs = cand.cs
    for attempt in (1, 2):
        try:
            # The version the search judged idle: any write since makes this a 409.
            return kube.patch_set(cand.ref, patch, resource_version=cs.metadata.resource_version)
        except NotFound:
            break
        except AdmissionDenied as err:
            # cocoon-webhook refuses it: its owner is told once; the next one is tried.
            report_refusal(kube, cs, "seat reclaim suspend", err)
            return None
        except Conflict:
            if attempt == 2:
                break
            # Re-read, re-judge once: an operator's status write must not cost the claim.
            fresh = kube.get_set(cand.ref)
            if fresh is None or not isinstance(why_not(fresh, waker, now=now), Candidate):
                break
            cs = fresh
    log.info("seat reclaim: candidate changed meanwhile", victim=str(cand.ref))
    return None


def _report(
    kube: KubeApi,
    waker: CocoonSet,
    victim: CocoonSet,
    cand: Candidate,
    pod_uid: str,
    *,
    now: datetime,
    publisher: LifecyclePublisher | None,
) -> None:
    idle, after = format_duration(cand.idle_for), format_duration(cand.reclaimable_after)
    to_victim = (
        f"Suspended after {idle} idle (reclaimable-after {after}): its seat goes to the waiting "
        f"wake of {set_key(waker)}"
    )
    to_waker = f"Reclaimed the seat of {set_key(victim)} (idle {idle}) for this wake"
    for cs, message in ((victim, to_victim), (waker, to_waker)):
        try:
            kube.emit_event(
                cs, reason=k.REASON_SEAT_RECLAIMED, message=message, key=f"reclaim/{pod_uid}"
            )
        except CocoonError as err:
            log.warning("could not emit event", set=set_key(cs), error=str(err))
    log.count(k.METRIC_SEAT_RECLAIMS, namespace=victim.namespace, pool=cand.pool)
    lifecycle.emit(
        publisher,
        lifecycle.seat_reclaimed(
            victim,
            waker=set_key(waker),
            pod_uid=pod_uid,
            idle_for=cand.idle_for,
            pool=cand.pool,
            now=now,
        ),
    )
