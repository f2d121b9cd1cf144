"""The wake (docs/design.md#wake) as a table: observed state -> the next step. Pure, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants as k
from shared.enums import CocoonSetPhase as Phase
from shared.reconcile.decide import NO_REGISTRY, Observed, decide
from shared.reconcile.steps import (
    ClearStaleHint,
    CompleteWake,
    CreateMain,
    DropSnapshot,
    NotOurs,
    PersistWaking,
    Probe,
    ProbeRegistry,
    Refuse,
    ReportNoCapacity,
    RereadMain,
    Retry,
    SetPhase,
    StampGeneration,
    Step,
    Wait,
)
from tests.fixtures.cocoon_objects import VM0, make_pod, make_set

RESTORING = {"restore": True, "node": "node-a", "vm_id": None}
LIVE = {"restore": True, "node": "node-a", "vm_id": "vm-123", "running": True}
# This pod's wake is booked (our own CompleteWake wrote it with the hint's CAS).
BOOKED = {k.ANN_LAST_WAKE_POD: "pod-uid-1"}


def obs(set_kw: dict[str, Any], pods: list[dict[str, Any]] | None = None, **extra: Any) -> Observed:
    kw = {"suspend": False, **set_kw}
    return Observed(cs=make_set(**kw), pods=tuple(make_pod(**p) for p in pods or []), **extra)


NORMAL_FLOW = "the normal flow's"
ASKED = {k.ANN_WAKE_REQUESTED_BY: "wake:alice"}

CASES: list[tuple[str, Observed, Step]] = [
    # --- engagement
    (
        "running-never-consults-registry",
        obs({"phase": "Running", "hint": "node-a"}),
        NotOurs(f"phase Running: {NORMAL_FLOW}"),
    ),
    ("pending-is-normal-flow", obs({"phase": "Pending"}), NotOurs(f"phase Pending: {NORMAL_FLOW}")),
    (
        # The operator dropped the snapshot on an image change and boots fresh.
        "wake-taken-over-by-normal-flow-forgets-requester",
        obs({"phase": "Pending", "annotations": ASKED}),
        NotOurs(f"phase Pending: {NORMAL_FLOW}", forget_requester=True),
    ),
    (
        "released-record-keeps-requester",
        obs({"phase": "Pending", "annotations": {**ASKED, k.ANN_HIBERNATED_IMAGE: "img:1"}}),
        NotOurs(f"phase Pending: {NORMAL_FLOW}"),
    ),
    (
        "suspending-without-hint-left-alone",
        obs({"phase": "Suspending"}),
        NotOurs(f"phase Suspending: {NORMAL_FLOW}"),
    ),
    (
        "suspending-with-hint-fast-unsuspend",
        obs({"phase": "Suspending", "hint": "node-a"}),
        ProbeRegistry((VM0,)),
    ),
    (
        "suspended-no-main-probes",
        obs({"phase": "Suspended", "hint": "node-a"}),
        ProbeRegistry((VM0,)),
    ),
    ("suspended-no-hint-probes", obs({"phase": "Suspended"}), ProbeRegistry((VM0,))),
    ("waking-no-main-probes", obs({"phase": "Waking", "hint": "node-a"}), ProbeRegistry((VM0,))),
    (
        "wake-without-registry-refuses",
        obs({"phase": "Suspended"}, registry_configured=False),
        Refuse(NO_REGISTRY),
    ),
    # --- policy edits while suspended: state decides, not the policy value
    (
        "retain-without-released-seat-left-alone",
        obs({"phase": "Suspended", "policy": "retain"}),
        NotOurs("hibernatePolicy=retain and no released seat to restore"),
    ),
    (
        "policy-edit-after-release-still-restores",
        obs({"phase": "Suspended", "policy": "retain", "hint": "node-a"}),
        ProbeRegistry((VM0,)),
    ),
    # --- no main pod
    (
        "probe-error-fails-closed",
        obs({"phase": "Suspended"}, probes={VM0: Probe.ERROR}),
        Retry(f"registry error checking {VM0}:hibernate", (VM0,)),
    ),
    (
        "no-snapshot-is-not-ours",
        obs({"phase": "Suspended"}, probes={VM0: Probe.ABSENT}),
        NotOurs("no snapshot: suspended before first boot (a fresh boot is the normal flow's)"),
    ),
    (
        "snapshot-present-persists-waking-first",
        obs({"phase": "Suspended", "hint": "node-a"}, probes={VM0: Probe.PRESENT}),
        PersistWaking(stamp_started=True),
    ),
    (
        "fast-unsuspend-persists-waking",
        obs({"phase": "Suspending", "hint": "node-a"}, probes={VM0: Probe.PRESENT}),
        PersistWaking(stamp_started=True),
    ),
    # --- waking, main not live
    (
        "restoring-waits",
        obs({"phase": "Waking", "hint": "node-a"}, [RESTORING]),
        Wait("restoring agent-0: VM not live yet"),
    ),
    (
        "id-without-running-container-is-not-live",
        obs({"phase": "Waking", "hint": "node-a"}, [{**RESTORING, "vm_id": "vm-1"}]),
        Wait("restoring agent-0: VM not live yet"),
    ),
    (
        "unschedulable-reports-no-capacity",
        obs(
            {"phase": "Waking", "hint": "node-a"},
            [{**RESTORING, "node": None, "unschedulable": "0/3 nodes are available"}],
        ),
        ReportNoCapacity(
            pod_uid="pod-uid-1", message="0/3 nodes are available", pod_name="agent-0"
        ),
    ),
    (
        "stale-phase-while-restoring-re-enters-waiting",
        obs(
            {"phase": "Pending", "hint": "node-a", "annotations": {k.ANN_WAKE_STARTED: "t"}},
            [RESTORING],
        ),
        PersistWaking(stamp_started=False),
    ),
    # --- waking, main live
    (
        "live-drops-the-tag-first",
        obs({"phase": "Waking", "hint": "node-a"}, [LIVE]),
        DropSnapshot(VM0),
    ),
    (
        "drops-the-sets-own-snapshot-whatever-the-pod-annotation-says",
        obs({"phase": "Waking", "hint": "node-a"}, [{**LIVE, "vm": "vk-team-b-victim-0"}]),
        DropSnapshot(VM0),
    ),
    (
        "dropped-completes-on-hint-node",
        obs({"phase": "Waking", "hint": "node-a"}, [LIVE], dropped=frozenset({VM0})),
        CompleteWake(k.PLACEMENT_HINT_NODE),
    ),
    (
        "dropped-completes-in-pool",
        obs({"phase": "Waking", "hint": "node-b"}, [LIVE], dropped=frozenset({VM0})),
        CompleteWake(k.PLACEMENT_POOL),
    ),
    (
        "hint-cleared-writes-running-when-ready",
        obs(
            {"phase": "Waking", "annotations": BOOKED},
            [{**LIVE, "ready": True}],
            dropped=frozenset({VM0}),
        ),
        SetPhase(Phase.RUNNING, "the restored VM is live"),
    ),
    (
        "hint-cleared-writes-pending-when-not-ready",
        obs({"phase": "Waking", "annotations": BOOKED}, [LIVE], dropped=frozenset({VM0})),
        SetPhase(Phase.PENDING, "the restored VM is live"),
    ),
    (
        "completion-survives-a-stale-phase",
        obs({"phase": "Running", "hint": "node-a"}, [LIVE]),
        DropSnapshot(VM0),
    ),
    (
        "completion-with-stale-phase-counts-once",
        obs({"phase": "Running", "hint": "node-a"}, [LIVE], dropped=frozenset({VM0})),
        CompleteWake(k.PLACEMENT_HINT_NODE),
    ),
    (
        "own-completion-still-writes-the-implied-phase",
        obs(
            {"phase": "Pending", "annotations": BOOKED},
            [{**LIVE, "ready": True}],
            dropped=frozenset({VM0}),
            completed_wake=True,
        ),
        SetPhase(Phase.RUNNING, "the restored VM is live"),
    ),
    (
        "completed-wake-disengages",
        obs({"phase": "Running", "annotations": BOOKED}, [{**LIVE, "ready": True}]),
        NotOurs(f"phase Running: {NORMAL_FLOW}"),
    ),
    (
        "completed-pending-wake-disengages",
        obs({"phase": "Pending", "annotations": BOOKED}, [LIVE]),
        NotOurs(f"phase Pending: {NORMAL_FLOW}"),
    ),
    # --- suspended with a main pod: ghost or in-place wake
    (
        "suspended-main-with-hint-is-reread",
        obs({"phase": "Suspended", "hint": "node-a"}, [{"hibernate": True, "state": "hibernated"}]),
        RereadMain("agent-0", "pod-uid-1"),
    ),
    (
        "reread-alive-restored-main-is-in-place-wake",
        obs(
            {"phase": "Suspended", "hint": "node-a"},
            [{"hibernate": True, "restore": True}],
            reread={"pod-uid-1": True},
        ),
        NotOurs("agent-0 is alive: an in-place unsuspend wakes it"),
    ),
    # --- a stale hint: the stash landed, the delete lost, the user unsuspended
    (
        "reread-alive-never-released-main-clears-the-stale-hint",
        obs(
            {"phase": "Suspended", "hint": "node-a"},
            [{"hibernate": True}],
            reread={"pod-uid-1": True},
        ),
        ClearStaleHint("agent-0 is alive and was never released: stale hint"),
    ),
    (
        "running-with-a-stale-hint-rereads-the-main",
        obs({"phase": "Running", "hint": "node-a"}, [{"running": True, "vm_id": "vm-1"}]),
        RereadMain("agent-0", "pod-uid-1"),
    ),
    (
        "running-with-a-stale-hint-alive-clears-it",
        obs(
            {"phase": "Running", "hint": "node-a"},
            [{"running": True, "vm_id": "vm-1"}],
            reread={"pod-uid-1": True},
        ),
        ClearStaleHint("agent-0 is alive and was never released: stale hint"),
    ),
    (
        "running-with-a-hint-and-a-ghost-main-is-the-normal-flows",
        obs({"phase": "Running", "hint": "node-a"}, [{}], reread={"pod-uid-1": False}),
        NotOurs(f"phase Running: {NORMAL_FLOW}"),
    ),
    (
        "reread-ghost-waits-and-retries",
        obs(
            {"phase": "Suspending", "hint": "node-a"},
            [{"hibernate": True}],
            reread={"pod-uid-1": False},
        ),
        Retry("agent-0 is a ghost of the released pod: retry shortly"),
    ),
    (
        "retain-style-placeholder-left-alone",
        obs({"phase": "Suspended"}, [{"hibernate": True, "state": "hibernated"}]),
        NotOurs("nothing released to restore (retain placeholder or kept terminal pod)"),
    ),
    (
        # The operator checks a failed main before anything else: Failed, as it writes.
        "kept-terminal-main-is-failed",
        obs({"phase": "Suspended", "hint": "node-a"}, [{"hibernate": True, "phase": "Failed"}]),
        SetPhase(Phase.FAILED, "main pod agent-0 failed: Failed"),
    ),
    (
        "terminating-main-is-no-main",
        obs({"phase": "Suspended", "hint": "node-a"}, [{"hibernate": True, "terminating": True}]),
        ProbeRegistry((VM0,)),
    ),
    (
        "fast-unsuspend-over-a-terminating-main-persists-waking-first",
        obs(
            {"phase": "Suspending", "hint": "node-a"},
            [{"hibernate": True, "terminating": True}],
            probes={VM0: Probe.PRESENT},
        ),
        PersistWaking(stamp_started=True),
    ),
    (
        "terminating-old-main-holds-the-name-retry-not-create",
        obs(
            {"phase": "Waking", "hint": "node-a"},
            [{"hibernate": True, "terminating": True}],
            probes={VM0: Probe.PRESENT},
        ),
        Retry("old main agent-0 still terminating: retry shortly"),
    ),
    (
        "phase-written-after-completion-disengages",
        obs({"phase": "Pending", "annotations": BOOKED}, [LIVE], dropped=frozenset({VM0})),
        NotOurs(f"phase Pending: {NORMAL_FLOW}"),
    ),
    (
        "unfinished-wake-live-completes",
        obs({"phase": "Pending", "hint": "node-a"}, [LIVE], dropped=frozenset({VM0})),
        CompleteWake(k.PLACEMENT_HINT_NODE),
    ),
    (
        "hint-cleared-pending-phase",
        obs({"phase": "Waking", "annotations": BOOKED}, [LIVE], dropped=frozenset({VM0})),
        SetPhase(Phase.PENDING, "the restored VM is live"),
    ),
]


@pytest.mark.parametrize(
    ("observed", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_wake_decision(observed: Observed, expected: Step) -> None:
    assert decide(observed) == expected


def test_waking_with_snapshot_creates_the_restore_pod() -> None:
    step = decide(obs({"phase": "Waking", "hint": "node-a"}, probes={VM0: Probe.PRESENT}))
    assert isinstance(step, CreateMain)
    meta, spec = step.body["metadata"], step.body["spec"]
    assert meta["annotations"][k.ANN_RESTORE] == k.TRUE
    assert spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "preference"
    ]["matchExpressions"][0]["values"] == ["node-a"]
    assert "nodeName" not in spec


# --- issue 13: the real operator and vk-cocoon, not our model of them -----------------


def test_no_capacity_warning_reads_as_the_operators() -> None:
    step = decide(
        obs(
            {"phase": "Waking", "hint": "node-a"},
            [{**RESTORING, "node": None, "unschedulable": "0/3 nodes are available"}],
        )
    )
    assert isinstance(step, ReportNoCapacity)
    assert step.event_message == "main pod agent-0 unschedulable: 0/3 nodes are available"


def test_unfinished_wake_needs_hibernate_not_true_and_restore_true() -> None:
    # `hibernate: "false"` is not a hibernate request: the restore is unfinished.
    main = {**RESTORING, "annotations": {k.ANN_HIBERNATE: "false"}}
    step = decide(obs({"phase": "Running", "hint": "node-a"}, [main]))
    assert step == PersistWaking(stamp_started=True)
    # `restore-from-hibernate: "false"` is no restore marker at all.
    marker_false = {
        "restore": False,
        "node": "node-a",
        "annotations": {k.ANN_RESTORE: "false"},
    }
    step = decide(obs({"phase": "Running", "hint": "node-a"}, [marker_false]))
    assert not isinstance(step, PersistWaking)


def test_a_wake_stamps_a_lagging_generation() -> None:
    step = decide(obs({"phase": "Waking", "hint": "node-a", "generation": 3}, [RESTORING]))
    assert step == StampGeneration(("agent-0",), 3)


def test_a_failed_restore_is_the_operators_failed_phase() -> None:
    failed = {**RESTORING, "state": "failed"}
    step = decide(obs({"phase": "Waking", "hint": "node-a"}, [failed]))
    assert step == SetPhase(Phase.FAILED, "main pod agent-0 failed: Running")
    # Once Failed, never flipped back to Waking (the stale-status arm would).
    step = decide(obs({"phase": "Failed", "hint": "node-a"}, [failed]))
    assert step == NotOurs("main pod agent-0 failed: the operator's to triage")


def test_a_main_the_set_does_not_control_is_not_its_main() -> None:
    stranger = {**LIVE, "owner_uid": None}
    # No owned main: the wake probes for the snapshot to restore its own.
    assert decide(obs({"phase": "Waking", "hint": "node-a"}, [stranger])) == ProbeRegistry((VM0,))
