"""Issue 24, 5: suspending a set while its wake waits for a seat settles. Pure, no I/O.

The restore pod has no node and no VM: vk-cocoon never sees it, so it never
reports it `hibernated`. Before, the release asked it to hibernate and then
waited for that report forever (phase `Suspending`), while the pod kept its
place in the seat line and was the first to be ungated. Now it is deleted once
the registry confirms the snapshot it was to restore from.
"""

from __future__ import annotations

from shared import constants as k
from shared.reconcile.decide import Observed, decide
from shared.reconcile.steps import (
    FlagAndDelete,
    PodTarget,
    Probe,
    ProbeRegistry,
    RequestHibernation,
)
from tests.fixtures.cocoon_objects import VM0, make_pod, make_set

WAITING = {"restore": True, "node": None, "vm_id": None, "unschedulable": "0/2 nodes are available"}
STASHED = {
    k.ANN_DELETE_VM_NAMES: VM0,
    k.ANN_RELEASE_ROUND: "2",
    k.ANN_RELEASE_ROUND_PODS: "agent-0",
}


def suspended_while_waiting(**extra: object) -> Observed:
    cs = make_set(phase="Waking", hint="node-a", annotations=STASHED)
    return Observed(cs=cs, pods=(make_pod(**WAITING),), **extra)  # type: ignore[arg-type]


def test_a_waiting_restore_pod_is_not_asked_to_hibernate() -> None:
    step = decide(suspended_while_waiting())
    assert not isinstance(step, RequestHibernation)
    assert step == ProbeRegistry((VM0,))


def test_it_is_deleted_once_the_snapshot_is_confirmed() -> None:
    step = decide(suspended_while_waiting(probes={VM0: Probe.PRESENT}))
    assert step == FlagAndDelete((PodTarget("agent-0", "pod-uid-1", "7", needs_flag=True),))


def test_not_without_the_snapshot() -> None:
    step = decide(suspended_while_waiting(probes={VM0: Probe.ABSENT}))
    assert not isinstance(step, FlagAndDelete)


def test_a_bound_restore_pod_still_hibernates_first() -> None:
    cs = make_set(phase="Waking", hint="node-a", annotations=STASHED)
    bound = make_pod(restore=True, node="node-a", vm_id="vm-1", running=True)
    assert isinstance(decide(Observed(cs=cs, pods=(bound,))), RequestHibernation)
