"""Release (docs/design.md#release) as a table: observed state -> next step. Pure, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants as k
from shared.enums import CocoonSetPhase as Phase
from shared.models import ToolboxStatus
from shared.reconcile.decide import NO_REGISTRY, Observed, decide
from shared.reconcile.steps import (
    Done,
    FlagAndDelete,
    NotOurs,
    PodTarget,
    Probe,
    ProbeRegistry,
    Refuse,
    ReportReleased,
    RequestHibernation,
    Retry,
    SetPhase,
    Stash,
    Step,
    Wait,
)
from tests.fixtures.cocoon_objects import VM0, make_pod, make_set

HIBERNATED = {"hibernate": True, "state": "hibernated", "generation": 2}
PRESENT = {VM0: Probe.PRESENT}
# The round (the set's generation at the stash) and its pods are part of the stash.
ROUND = {k.ANN_RELEASE_ROUND: "2", k.ANN_RELEASE_ROUND_PODS: "agent-0"}
STASHED = {k.ANN_DELETE_VM_NAMES: VM0, **ROUND}


def obs(
    set_kw: dict[str, Any] | None = None,
    pods: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> Observed:
    return Observed(
        cs=make_set(**(set_kw or {})),
        pods=tuple(make_pod(**p) for p in (pods if pods is not None else [HIBERNATED])),
        **extra,
    )


MAIN = PodTarget("agent-0", "pod-uid-1", "7", needs_flag=True)
main_target = FlagAndDelete((MAIN,))
# The stash carries the flags the delete after it needs: sent beside it.
FLAG_MAIN = (MAIN,)

CASES: list[tuple[str, Observed, Step]] = [
    # --- who this is for
    (
        "retain-suspend-is-not-ours",
        obs({"policy": "retain"}),
        NotOurs("hibernatePolicy=retain: the seat stays taken"),
    ),
    (
        "default-policy-is-retain",
        obs({"policy": None}),
        NotOurs("hibernatePolicy=retain: the seat stays taken"),
    ),
    (
        "set-being-deleted",
        Observed(
            cs=make_set().model_copy(
                update={
                    "metadata": make_set().metadata.model_copy(update={"deletion_timestamp": "x"})
                }
            ),
            pods=(),
        ),
        NotOurs("the set is being deleted"),
    ),
    ("no-registry-refuses", obs(registry_configured=False, probes=PRESENT), Refuse(NO_REGISTRY)),
    (
        "no-registry-refuses-even-without-pods",
        obs(pods=[], registry_configured=False),
        Refuse(NO_REGISTRY),
    ),
    # --- 1. request hibernation
    ("request-hibernation", obs(pods=[{}]), RequestHibernation(("agent-0",), 2)),
    (
        "terminating-pod-is-not-asked",
        obs(pods=[{"terminating": True}]),
        SetPhase(Phase.SUSPENDED, "no owned pod holds a seat"),
    ),
    # --- 2. the gate
    (
        "hibernating-marks-suspending",
        obs({"phase": "Running"}, [{"hibernate": True, "state": "hibernating", "generation": 2}]),
        SetPhase(Phase.SUSPENDING, "pod agent-0 is hibernating, not hibernated"),
    ),
    (
        "hibernating-stays-suspending",
        obs(pods=[{"hibernate": True, "state": "hibernating", "generation": 2}]),
        Wait("pod agent-0 is hibernating, not hibernated"),
    ),
    (
        "no-vm-name-waits",
        obs(pods=[{**HIBERNATED, "vm": None}]),
        Wait("pod agent-0 has no VM name yet"),
    ),
    (
        "stale-generation-waits",
        obs(pods=[{**HIBERNATED, "generation": 1}]),
        Wait("pod agent-0 hibernated for generation 1, the set is at 2"),
    ),
    (
        "garbage-generation-reads-as-zero",
        obs(
            pods=[
                {**HIBERNATED, "generation": None, "annotations": {k.ANN_LIFECYCLE_GENERATION: "x"}}
            ]
        ),
        Wait("pod agent-0 hibernated for generation 0, the set is at 2"),
    ),
    ("newer-generation-passes", obs(pods=[{**HIBERNATED, "generation": 3}]), ProbeRegistry((VM0,))),
    ("verified-annotations-probe-registry", obs(), ProbeRegistry((VM0,))),
    (
        "registry-error-is-an-error",
        obs(probes={VM0: Probe.ERROR}),
        Retry(f"registry error checking {VM0}:hibernate", (VM0,)),
    ),
    (
        "snapshot-absent-waits",
        obs(probes={VM0: Probe.ABSENT}),
        Wait(f"snapshot {VM0}:hibernate not in the registry"),
    ),
    (
        "snapshot-absent-marks-suspending",
        obs({"phase": "Suspended"}, probes={VM0: Probe.ABSENT}),
        SetPhase(Phase.SUSPENDING, f"snapshot {VM0}:hibernate not in the registry"),
    ),
    # --- 3. stash
    (
        "verified-stashes-first",
        obs(probes=PRESENT),
        Stash(VM0, "node-a", "2", "agent-0", FLAG_MAIN),
    ),
    (
        "stash-is-a-sorted-union",
        obs(
            {
                "annotations": {k.ANN_DELETE_VM_NAMES: "vk-team-a-agent-9,vk-old-a-0"},
                "agents_status": [{"role": "main", "slot": 0, "vmName": "vk-team-a-agent-7"}],
            },
            probes=PRESENT,
        ),
        Stash(
            f"vk-old-a-0,{VM0},vk-team-a-agent-7,vk-team-a-agent-9",
            "node-a",
            "2",
            "agent-0",
            FLAG_MAIN,
        ),
    ),
    (
        "unscheduled-main-leaves-the-hint",
        obs(pods=[{**HIBERNATED, "node": None}], probes=PRESENT),
        Stash(VM0, None, "2", "agent-0", FLAG_MAIN),
    ),
    (
        "hint-refreshed-when-node-differs",
        obs({"annotations": STASHED, "hint": "node-old"}, probes=PRESENT),
        Stash(VM0, "node-a", flags=FLAG_MAIN),
    ),
    (
        "a-new-round-is-stamped-before-any-delete",
        obs(
            {"annotations": {**STASHED, k.ANN_RELEASE_ROUND: "1"}, "hint": "node-a"},
            probes=PRESENT,
        ),
        Stash(VM0, "node-a", "2", "agent-0", FLAG_MAIN),
    ),
    (
        "a-pod-joining-the-round-is-recorded",
        obs(
            {"annotations": {**STASHED, k.ANN_RELEASE_ROUND_PODS: "agent-9"}, "hint": "node-a"},
            probes=PRESENT,
        ),
        Stash(VM0, "node-a", "2", "agent-0,agent-9", FLAG_MAIN),
    ),
    # --- 4-6. flag, delete, settle
    (
        "stashed-flags-and-deletes",
        obs({"annotations": STASHED, "hint": "node-a"}, probes=PRESENT),
        main_target,
    ),
    (
        "already-flagged-is-not-reflagged",
        obs(
            {"annotations": STASHED, "hint": "node-a"},
            [{**HIBERNATED, "keep": True}],
            probes=PRESENT,
        ),
        FlagAndDelete((PodTarget("agent-0", "pod-uid-1", "7", needs_flag=False),)),
    ),
    (
        "terminal-pod-is-skipped-and-kept",
        obs(
            {"annotations": STASHED, "hint": "node-a"},
            [
                HIBERNATED,
                {
                    "name": "agent-1",
                    "role": k.ROLE_SUB_AGENT,
                    "slot": "1",
                    "vm": "vk-team-a-agent-1",
                    "hibernate": True,
                    "phase": "Failed",
                    "uid": "pod-uid-2",
                },
            ],
            probes=PRESENT,
        ),
        # agent-1's VM joins the stash (teardown GC needs it), but it is not deleted.
        Stash(f"{VM0},vk-team-a-agent-1", "node-a", flags=FLAG_MAIN),
    ),
    (
        # Today's operator checks spec.suspend first and skips only kubelet-terminal
        # pods: a VM whose hibernate failed (vk-cocoon's sticky `failed`) still holds its
        # state, so the release waits and says why; the operator's timeout decides.
        "a-vm-failed-in-hibernate-keeps-the-release-waiting",
        obs(pods=[{"hibernate": True, "state": "failed"}]),
        Wait("vk-cocoon reports pod agent-0 failed: no message"),
    ),
    (
        # SuspendTimedOut wrote Failed: never flipped back to Suspending by the functions.
        "a-timed-out-suspend-stays-failed",
        obs({"phase": "Failed"}, [{"hibernate": True, "state": "failed"}]),
        Wait(
            "vk-cocoon reports pod agent-0 failed: no message (phase Failed: the suspend timed out)"
        ),
    ),
    (
        "a-timed-out-suspend-is-not-flipped-back-by-a-missing-snapshot",
        obs({"phase": "Failed"}, [HIBERNATED]),
        ProbeRegistry((VM0,)),
    ),
    (
        "no-pods-settles-suspended",
        obs(pods=[]),
        SetPhase(Phase.SUSPENDED, "no owned pod holds a seat"),
    ),
    ("no-pods-already-suspended", obs({"phase": "Suspended"}, []), Done("released")),
    # --- the round's report (docs/how-it-works.md#failure-semantics)
    (
        "released-round-is-reported-once-suspended",
        obs({"phase": "Suspended", "annotations": STASHED}, []),
        ReportReleased("2", ("agent-0",)),
    ),
    (
        # The seat is free: the round's report goes out beside the phase (both at once).
        "settle-suspended-and-report-at-once",
        obs({"annotations": STASHED}, []),
        SetPhase(
            Phase.SUSPENDED, "no owned pod holds a seat", report=ReportReleased("2", ("agent-0",))
        ),
    ),
    (
        "a-reported-round-is-done",
        obs({"phase": "Suspended", "annotations": {**STASHED, k.ANN_RELEASE_REPORTED: "2"}}, []),
        Done("released"),
    ),
    (
        # A kubelet-Failed main has no VM state to keep: the suspend settles (hasLivePod).
        "a-kubelet-failed-main-settles-suspended",
        obs(pods=[{"hibernate": True, "phase": "Failed"}]),
        SetPhase(Phase.SUSPENDED, "no owned pod holds a seat"),
    ),
    (
        "only-terminal-non-main-pods-settle",
        obs(
            pods=[
                {
                    "name": "agent-1",
                    "role": k.ROLE_SUB_AGENT,
                    "slot": "1",
                    "hibernate": True,
                    "phase": "Failed",
                }
            ]
        ),
        SetPhase(Phase.SUSPENDED, "no owned pod holds a seat"),
    ),
]


@pytest.mark.parametrize(
    ("observed", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_release_decision(observed: Observed, expected: Step) -> None:
    assert decide(observed) == expected


def test_terminal_pod_kept_after_stash() -> None:
    """Once stashed, only the live main is deleted; the failed sub-agent stays for triage."""
    observed = obs(
        {
            "annotations": {k.ANN_DELETE_VM_NAMES: f"{VM0},vk-team-a-agent-1", **ROUND},
            "hint": "node-a",
        },
        [
            HIBERNATED,
            {
                "name": "agent-1",
                "role": k.ROLE_SUB_AGENT,
                "slot": "1",
                "vm": "vk-team-a-agent-1",
                "hibernate": True,
                "phase": "Failed",
                "uid": "pod-uid-2",
            },
        ],
        probes=PRESENT,
    )
    assert decide(observed) == main_target


def test_registry_is_only_asked_after_every_annotation_passes() -> None:
    """No HEAD while any pod is still hibernating: the gate's cheap half goes first."""
    observed = obs(
        pods=[
            HIBERNATED,
            {
                "name": "agent-1",
                "role": k.ROLE_SUB_AGENT,
                "slot": "1",
                "vm": "vk-team-a-agent-1",
                "hibernate": True,
                "state": "hibernating",
                "generation": 2,
                "uid": "u2",
            },
        ]
    )
    assert isinstance(decide(observed), Wait)


# --- issue 13: the real operator and vk-cocoon, not our model of them -----------------

STRANGER = {
    # Carries the set's labels and its own hibernated, pushed VM, but the set does
    # not control it (no controller reference with the set's uid).
    "name": "agent-stranger",
    "uid": "pod-uid-stranger",
    "vm": "vk-team-a-agent-stranger",
    **{k2: v for k2, v in HIBERNATED.items()},
}


@pytest.mark.parametrize(
    "stranger",
    [
        {**STRANGER, "owner_uid": None},
        {**STRANGER, "owner_uid": "another-sets-uid"},
    ],
    ids=["no-owner", "other-owner"],
)
def test_a_labelled_pod_the_set_does_not_control_is_never_touched(
    stranger: dict[str, Any],
) -> None:
    # Not flagged (it lacks hibernate here), not stashed, not deleted.
    unflagged = {**stranger, "hibernate": False}
    assert decide(obs(pods=[HIBERNATED, unflagged])) == ProbeRegistry((VM0,))
    # The round names only the pods the set controls: the stranger is not in it.
    assert decide(obs(pods=[HIBERNATED, stranger], probes=PRESENT)) == Stash(
        VM0, "node-a", "2", "agent-0", FLAG_MAIN
    )
    assert (
        decide(
            obs({"annotations": STASHED, "hint": "node-a"}, [HIBERNATED, stranger], probes=PRESENT)
        )
        == main_target
    )
    # A set whose only labelled pod is a stranger has nothing to release.
    assert decide(obs(pods=[stranger])) == SetPhase(Phase.SUSPENDED, "no owned pod holds a seat")


def test_the_hibernate_request_carries_the_current_generation_stamp() -> None:
    """vk-cocoon echoes the pod's stamp: a hibernate=true pod stamped 1 on a set at
    generation 2 must be re-stamped, or its report can never pass the gate."""
    lagging = {**HIBERNATED, "stamp": 1, "generation": 1}
    assert decide(obs(pods=[lagging])) == RequestHibernation(("agent-0",), 2)
    # Stamped and echoed at 2: the gate goes on to the registry.
    assert decide(obs(pods=[{**HIBERNATED, "stamp": 2}])) == ProbeRegistry((VM0,))


def test_pods_being_deleted_are_skipped_by_the_gate() -> None:
    leaving = {
        "name": "agent-1",
        "uid": "pod-uid-2",
        "role": k.ROLE_SUB_AGENT,
        "slot": "1",
        "vm": "vk-team-a-agent-1",
        "state": "ready",
        "hibernate": True,
        "terminating": True,
    }
    assert decide(obs(pods=[HIBERNATED, leaving])) == ProbeRegistry((VM0,))


def test_managed_comes_from_the_annotation() -> None:
    # A main without `managed: "true"` has no VM lifecycle to wait for (the operator
    # reads the annotation, not the role): it is not gated on.
    unmanaged = {"hibernate": True, "state": "ready", "managed": False}
    assert decide(obs(pods=[unmanaged], probes=PRESENT)) == Stash(
        VM0, "node-a", "2", "agent-0", FLAG_MAIN
    )


@pytest.mark.parametrize("raw", ["1_0", " 7", "7 ", "\u0663", "+", "99999999999999999999"])
def test_observed_generation_parses_as_go(raw: str) -> None:
    # Go's strconv.ParseInt reads these as errors (0): stale, so the gate waits.
    pod = {**HIBERNATED, "generation": None, "annotations": {k.ANN_LIFECYCLE_GENERATION: raw}}
    step = decide(obs(pods=[pod]))
    assert isinstance(step, Wait), step


def test_the_stash_includes_toolbox_vm_names() -> None:
    cs_kw = {"annotations": {}}
    observed = obs(cs_kw, [HIBERNATED], probes=PRESENT)
    observed.cs.status.toolboxes = [ToolboxStatus(name="tb", vm_name="vk-team-a-agent-tb")]
    assert decide(observed) == Stash(
        f"{VM0},vk-team-a-agent-tb", "node-a", "2", "agent-0", FLAG_MAIN
    )
