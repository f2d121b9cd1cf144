"""Issue 24, 4 and 8: what cocoon-operator completed first is still booked by the functions.

A wake (4):

The operator's wake arm (cocoonset/slotrelease.go reconcileWake) drops the tag,
clears the hint and writes the phase as soon as its pod watch sees the VM id,
so the functions' next read finds no hint. Before, that read took the
DropSnapshot / SetPhase path and never CompleteWake: `last-wake-completed`
was never written (the idle clock stayed at the pre-suspend stamp, so the
sweep suspended the set again at once), `wake-started` / `seat-wait` stayed,
and no WakeCompleted was emitted.

A release (8): the operator's slot release (reconcileSuspendRelease) stashes,
writes the hint and deletes the pods itself; the functions' stash never ran,
so no round was stamped and no SeatReleased ever went out. Pure, no I/O.
"""

from __future__ import annotations

from typing import Any

from shared import constants as k
from shared.reconcile.decide import Observed, decide
from shared.reconcile.steps import (
    CompleteWake,
    Done,
    DropSnapshot,
    JoinLine,
    NotOurs,
    ReportReleased,
    Stash,
)
from tests.fixtures.cocoon_objects import VM0, make_pod, make_set

LIVE = {"restore": True, "node": "node-a", "vm_id": "vm-123", "running": True, "ready": True}


def preferring(want: str, **pod: Any) -> Any:
    p = make_pod(**pod)
    spec = p.spec.model_copy(
        update={
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "preference": {
                                "matchExpressions": [
                                    {"key": k.LABEL_HOSTNAME, "operator": "In", "values": [want]}
                                ]
                            },
                        }
                    ]
                }
            }
        }
    )
    return p.model_copy(update={"spec": spec})


def operator_completed(**set_kw: Any) -> Observed:
    # What the operator leaves: phase derived (Scaling/Running), no hint, tag gone.
    kw = {"suspend": False, "phase": "Running", **set_kw}
    return Observed(cs=make_set(**kw), pods=(preferring("node-a", **LIVE),))


def test_a_wake_the_operator_completed_is_booked() -> None:
    o = operator_completed(annotations={k.ANN_WAKE_STARTED: "2026-01-01T00:00:00Z"})
    assert decide(o) == DropSnapshot(VM0)  # idempotent: 404 is done
    done = Observed(cs=o.cs, pods=o.pods, dropped=frozenset({VM0}))
    # Landed on the node of its preferred affinity (the hint it was created for).
    assert decide(done) == CompleteWake(k.PLACEMENT_HINT_NODE)


def test_landing_elsewhere_is_a_pool_placement() -> None:
    o = operator_completed()
    moved = Observed(cs=o.cs, pods=(preferring("node-b", **LIVE),), dropped=frozenset({VM0}))
    assert decide(moved) == CompleteWake(k.PLACEMENT_POOL)


def test_a_booked_wake_is_booked_once() -> None:
    o = operator_completed(annotations={k.ANN_LAST_WAKE_POD: "pod-uid-1"})
    assert isinstance(decide(o), NotOurs)


def test_a_retain_set_or_a_hibernating_pod_is_not_a_wake() -> None:
    assert isinstance(decide(operator_completed(policy="retain")), NotOurs)
    o = operator_completed()
    hibernating = Observed(cs=o.cs, pods=(preferring("node-a", **LIVE, hibernate=True),))
    assert not isinstance(decide(hibernating), CompleteWake | DropSnapshot)


def released(operator: bool = True, **set_kw: Any) -> Observed:
    cs = make_set(phase="Suspended", **set_kw)
    # The operator has observed the set's generation (else the functions wait for it).
    cs = cs.model_copy(
        update={"status": cs.status.model_copy(update={"observed_generation": cs.generation})}
    )
    return Observed(cs=cs, pods=(), operator_present=operator)


def test_a_release_the_operator_did_is_booked_once() -> None:
    assert decide(released(hint="node-a")) == Stash("", None, round="2", round_pods="")
    booked = {k.ANN_RELEASE_ROUND: "2", k.ANN_RELEASE_ROUND_PODS: ""}
    assert decide(released(hint="node-a", annotations=booked)) == ReportReleased("2", ())
    reported = {**booked, k.ANN_RELEASE_REPORTED: "2"}
    assert decide(released(hint="node-a", annotations=reported)) == Done("released")


# A set the functions released (round 2 stamped before the delete, then reported), edited
# while released: the edit bumps the generation, and once read as a new round it reported
# a second SeatReleased for the one seat freed.
OURS = {k.ANN_RELEASE_ROUND: "2", k.ANN_RELEASE_ROUND_PODS: "agent-0", k.ANN_RELEASE_REPORTED: "2"}


def test_an_edit_of_a_set_the_functions_released_reports_no_second_release() -> None:
    edited = released(operator=False, hint="node-a", generation=3, annotations=OURS)
    assert decide(edited) == Done("released")


def test_an_image_edit_beside_the_operator_reports_no_second_release() -> None:
    record = {**OURS, k.ANN_HIBERNATED_IMAGE: "ghcr.io/acme/agent:old"}
    edited = released(hint="node-a", generation=3, annotations=record)
    assert edited.cs.spec.agent.image != "ghcr.io/acme/agent:old"
    assert decide(edited) == Done("released")


def test_the_operators_next_release_after_a_wake_is_booked() -> None:
    again = released(hint="node-a", generation=5, annotations=OURS)
    assert decide(again) == Stash("", None, round="5", round_pods="")


def test_suspended_before_first_boot_released_nothing() -> None:
    assert decide(released()) == Done("released")


# --- 7: the operator's own restore pods join the seat line ------------------------------

WAITING = {
    "restore": True,
    "node": None,
    "vm_id": None,
    "unschedulable": "0/2 nodes are available",
}


def operator_waking(**extra: Any) -> Observed:
    cs = make_set(suspend=False, phase="Waking", hint="node-a")
    pod = make_pod(**WAITING)
    meta = pod.metadata.model_copy(update={"creation_timestamp": "2026-01-01T00:00:00Z"})
    return Observed(cs=cs, pods=(pod.model_copy(update={"metadata": meta}),), **extra)


def test_an_operator_restore_pod_outside_the_line_joins_it() -> None:
    step = decide(operator_waking(seat_order=True))
    assert step == JoinLine("agent-0", "pod-uid-1", "2026-01-01T00:00:00Z")


def test_without_the_fair_order_it_is_left_alone() -> None:
    assert not isinstance(decide(operator_waking()), JoinLine)
