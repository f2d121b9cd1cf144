"""A push that beat vk-cocoon's `hibernated` report (it pushes first): watch that one pod until
the report lands, then reconcile again. Retrying would cost the platform's backoff and block a
registry's queue; past the bound (COCOON_REPORT_WAIT) the push is acknowledged."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from shared import constants as k
from shared import log
from shared.constants import METRIC_SEAT_FREED
from shared.enums import LifecycleState
from shared.names import SetRef, main_pod_name
from shared.ports import Report
from shared.reconcile.steps import Outcome, OutcomeResult

if TYPE_CHECKING:
    from shared.models import CocoonSet, Pod
    from shared.ports import KubeApi

# Reconciles after reports within one invocation: a report that does not pass the gate
# (a stale stamp) ends the wait rather than looping.
MAX_ROUNDS = 3


class Reconcile(Protocol):
    def __call__(self, *, report: Report | None) -> Outcome: ...


def awaiting_report(cs: CocoonSet, pod: Pod | None, vm: str) -> bool:
    """vk-cocoon was asked to hibernate `pod` (VM `vm`) for this round and has not answered."""
    if pod is None or pod.terminating or pod.vm_name != vm:
        return False
    if pod.annotations.get(k.ANN_HIBERNATE) != k.TRUE or pod.generation_stamp < cs.generation:
        return False  # not asked for this round: the reconcile asks first
    state = pod.lifecycle_state
    if state is LifecycleState.FAILED:
        return False
    return not (state is LifecycleState.HIBERNATED and pod.lifecycle_generation >= cs.generation)


def observe_seat_freed(ref: SetRef, pod: str, report: Report | None, *, now: datetime) -> None:
    """The seat-freed histogram: this run's DELETE of `pod` won; observe `now - report time`
    when it is the main pod whose report time is known (the report carries none itself)."""
    if report is None or pod != main_pod_name(ref.name):
        return
    if report.namespace == ref.namespace and report.pod == pod:
        seconds = (now - report.at).total_seconds()
        log.observe(METRIC_SEAT_FREED, seconds, namespace=ref.namespace, source=report.source)


def settle(
    ref: SetRef, vm: str, first: Outcome, *, kube: KubeApi, reconcile: Reconcile, budget: timedelta
) -> Outcome:
    """`first` (a waiting outcome) or the outcome after vk-cocoon's report, within `budget`."""
    bound = budget.total_seconds()
    if bound <= 0:
        return first
    started = time.monotonic()
    out = first
    for round_no in range(MAX_ROUNDS):
        cs = kube.get_set(ref)
        pod_name = next((p.name for p in kube.list_pods(ref) if p.vm_name == vm), None)
        if cs is None or pod_name is None:
            return out
        left = bound - (time.monotonic() - started)
        seen, pod = -1, None  # the first state past the wait and its place in the watch
        for i, state in enumerate(kube.watch_pod(ref.namespace, pod_name, timeout=max(left, 0.0))):
            if not awaiting_report(cs, state, vm):
                seen, pod = i, state
                break
        # The watch saw the report land: the one precise time of it we have.
        landed = seen > 0 and pod is not None and pod.lifecycle_state is LifecycleState.HIBERNATED
        report = Report(ref.namespace, pod_name, datetime.now(UTC), "push") if landed else None
        if seen == 0 and round_no > 0:
            return out  # the reconcile just saw this report and still waits: not ours to fix
        about = {"cocoonset": str(ref), "vm": vm, "waited_s": round(time.monotonic() - started, 3)}
        if seen < 0:
            log.info(
                "push acknowledged without vk-cocoon's report",
                **about,
                decision="acknowledge",
                bound_s=bound,
                reason="the report's own event or the sweep releases the seat",
            )
            return out
        log.info(
            "vk-cocoon reported after the push; reconciling again", **about, decision="reconcile"
        )
        out = reconcile(report=report)
        if out.result != OutcomeResult.WAITING:
            return out
    return out
