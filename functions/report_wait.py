"""A push that beat vk-cocoon's report: wait for the report inside the invocation, bounded.

vk-cocoon hibernates in the order Save -> Push `:hibernate` -> remove the VM
-> report (its `provider/cocoon/update.go` `hibernate`; the report is the
lifecycle annotation `hibernated`, with `hibernating` in between). So a push
event arrives while the pod still says `hibernating` (or `ready`): the gate
rightly says "not yet". Acknowledging then leaves the seat to the next audit
event or sweep; answering "retry" costs the platform's backoff (Pub/Sub and
Eventarc: 10 s and more) and blocks a Distribution endpoint's queue behind
each non-2xx. Instead the invocation watches that one pod (one LIST, one
WATCH) until vk-cocoon writes its report, then reconciles again, at once.

Bounded by `COCOON_REPORT_WAIT` (default 4 s, under Distribution's deployed
endpoint timeout of 5 s). Waited for only when this push's VM is a pod that
vk-cocoon has been asked to hibernate for the set's current generation and
has not reported on yet; any other "waiting" is acknowledged as before. When
the bound passes, the event is acknowledged with a log line saying so (the
report's own audit event or the sweep frees the seat): a stuck VM must not
hold a registry's notification queue forever. See docs/triggers.md for the
cost per release.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from shared import constants as k
from shared import log, seat_freed
from shared.enums import LifecycleState
from shared.reconcile.steps import OutcomeResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from shared.config import Settings
    from shared.models import CocoonSet, Pod
    from shared.names import SetRef
    from shared.ports import KubeApi
    from shared.reconcile import Outcome

# Re-reconciles after reports within one invocation: a report that does not pass the
# gate (a stale stamp) ends the wait rather than looping.
MAX_ROUNDS = 3


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


def _reported(cs: CocoonSet, pod: Pod | None, vm: str) -> bool:
    return not awaiting_report(cs, pod, vm)


def settle(
    ref: SetRef,
    vm: str,
    first: Outcome,
    *,
    kube: KubeApi,
    reconcile: Callable[[], Outcome],
    settings: Settings,
) -> Outcome:
    """`first` (a waiting outcome) or the outcome after vk-cocoon's report, within the bound."""
    budget = settings.report_wait.total_seconds()
    if budget <= 0:
        return first
    started = time.monotonic()
    out = first
    for round_no in range(MAX_ROUNDS):
        cs = kube.get_set(ref)
        pod_name = next((p.name for p in kube.list_pods(ref) if p.vm_name == vm), None)
        if cs is None or pod_name is None:
            return out
        left = budget - (time.monotonic() - started)
        reported = immediate = False
        report: seat_freed.Report | None = None
        for seen, pod in enumerate(kube.watch_pod(ref.namespace, pod_name, timeout=max(left, 0.0))):
            if _reported(cs, pod, vm):
                reported, immediate = True, seen == 0
                if (
                    not immediate
                    and pod is not None
                    and pod.lifecycle_state is LifecycleState.HIBERNATED
                ):
                    # The watch saw the report land: the one precise time of it this
                    # invocation has (the seat-freed histogram, shared/seat_freed.py).
                    report = seat_freed.Report(ref.namespace, pod_name, datetime.now(UTC), "push")
                break
        if reported and immediate and round_no > 0:
            return out  # the reconcile just saw this report and still waits: not ours to fix
        waited = time.monotonic() - started
        if not reported:
            log.info(
                "push acknowledged without vk-cocoon's report",
                cocoonset=str(ref),
                vm=vm,
                decision="acknowledge",
                waited_s=round(waited, 3),
                bound_s=budget,
                reason="the report's own event or the sweep releases the seat",
            )
            return out
        log.info(
            "vk-cocoon reported after the push; reconciling again",
            cocoonset=str(ref),
            vm=vm,
            decision="reconcile",
            waited_s=round(waited, 3),
        )
        with seat_freed.reported(report):
            out = reconcile()
        if out.result != OutcomeResult.WAITING:
            return out
    return out
